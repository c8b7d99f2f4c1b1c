fn main() {
    ono_link::emit()
}
