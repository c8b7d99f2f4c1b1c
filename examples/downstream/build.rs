// Gives this crate's binaries a RUNPATH to libtorch and keeps libtorch.so (and so CUDA) linked.
fn main() {
    ono_link::emit()
}
