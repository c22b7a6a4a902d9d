fn main() -> std::process::ExitCode {
    gpulint::cli::main()
}
