//! The `axon` binary: the CLI in [`axon::cli`].

/// mimalloc rather than glibc's malloc: with 2,000 streams allocating and freeing response
/// and request buffers on several threads, glibc's per-thread arenas kept freed memory (RSS
/// after a storm) and cost ~10% of the CPU of a push (BENCHMARKS.md). The `system-alloc`
/// feature keeps glibc's, for a heap profiler that interposes malloc.
#[cfg(not(feature = "system-alloc"))]
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Transparent huge pages off for the process, and mimalloc built not to ask for them
/// (`no_thp`): with them, each first touch of a 2 MiB region zeroed all of it, 35% of a
/// 10,000-proxy cold storm's CPU went to the kernel's `clear_page`, and RSS counted whole
/// huge pages of which h2's per-connection buffers use a few KiB (BENCHMARKS.md: storm
/// 3.6 → 2.5 s of CPU, RSS 560 → 417 MiB at 10,000 proxies).
fn main() -> std::process::ExitCode {
    #[cfg(target_os = "linux")]
    if let Err(e) = rustix::thread::disable_transparent_huge_pages(true) {
        eprintln!("axon: transparent huge pages could not be turned off: {e}");
    }
    axon::cli::main()
}
