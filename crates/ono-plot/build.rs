// ono-io (the atomic writer) links libtorch, so this crate's test binaries do too: the shared link
// script gives them its RUNPATH, as for every crate of the workspace.
fn main() {
    ono_link::emit()
}
