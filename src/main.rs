fn main() -> anyhow::Result<std::process::ExitCode> {
    axon::cli::main()
}
