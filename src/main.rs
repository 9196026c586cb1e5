//! The `axon` binary: the CLI in [`axon::cli`].

/// mimalloc rather than glibc's malloc: with 2,000 streams allocating and freeing response
/// and request buffers on several threads, glibc's per-thread arenas kept freed memory (RSS
/// after a storm) and cost ~10% of the CPU of a push (BENCHMARKS.md).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    axon::cli::main()
}
