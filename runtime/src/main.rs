fn main() -> std::process::ExitCode {
    wedge::cli::main()
}
