//! Waiting on conditions and picking ports: [`wait_until`] (the one way tests wait: poll a
//! condition against a deadline, never a fixed sleep), [`free_port`] and [`own_loopback`].

use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::thread;
use std::time::{Duration, Instant};

/// Polls `cond` every 50 ms until it returns true or `timeout` elapses.
/// Returns whether the condition became true. `cond` is always evaluated at
/// least once, and once more right at the deadline.
pub fn wait_until(timeout: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if cond() {
            return true;
        }
        let now = Instant::now();
        if now >= deadline {
            return false;
        }
        thread::sleep(Duration::from_millis(50).min(deadline - now));
    }
}

/// A port that was free on every address a moment ago, that no other call in this process
/// has handed out, and that the kernel never hands out by itself: two tests of one binary
/// run at once, and Envoy binds its listeners with `SO_REUSEPORT`, so two Envoys given the
/// same port would both listen on it and share its connections instead of one failing.
///
/// The port is taken below the ephemeral range (`ip_local_port_range`, 32768 and up here),
/// never from a `bind(0)`: a port handed out by `bind(0)` and released could be given by the
/// kernel to the next `bind(0)` or `connect` of another test before Envoy binds it, and
/// Envoy's listener would then fail with "Address already in use".
pub fn free_port() -> u16 {
    use std::collections::HashSet;
    use std::sync::Mutex;
    const LOW: u32 = 20_000;
    const SPAN: u32 = 12_000;
    static HANDED_OUT: Mutex<Option<HashSet<u16>>> = Mutex::new(None);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let start = (std::process::id().wrapping_mul(7919) ^ nanos) % SPAN;
    let mut handed_out = HANDED_OUT.lock().unwrap_or_else(|e| e.into_inner());
    let handed_out = handed_out.get_or_insert_with(HashSet::new);
    for i in 0..SPAN {
        let port = (LOW + (start + i * 7) % SPAN) as u16;
        if handed_out.contains(&port) {
            continue;
        }
        if TcpListener::bind(SocketAddr::from((Ipv4Addr::UNSPECIFIED, port))).is_ok() {
            handed_out.insert(port);
            return port;
        }
    }
    panic!("no free port left in {LOW}..{}", LOW + SPAN);
}

/// A loopback address of the caller's own (any 127/8 address is local on Linux) on which
/// every port of `ports` was free a moment ago: a listener that must have a given port (a
/// Sidecar egress listener on a service's port, or 80) binds it there whatever else runs.
pub fn own_loopback(ports: &[u16]) -> Ipv4Addr {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let seed = std::process::id().wrapping_mul(7919) ^ nanos;
    for _ in 0..100 {
        let n = seed.wrapping_add(NEXT.fetch_add(1, Ordering::SeqCst).wrapping_mul(104_729));
        let addr = Ipv4Addr::new(
            127,
            100 + (n % 100) as u8,
            (n >> 8) as u8,
            1 + ((n >> 16) % 250) as u8,
        );
        let free = ports
            .iter()
            .all(|port| TcpListener::bind(SocketAddr::from((addr, *port))).is_ok());
        if free {
            return addr;
        }
    }
    panic!("no loopback address with ports {ports:?} free");
}
