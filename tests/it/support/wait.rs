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

/// A port that was free on 127.0.0.1 a moment ago, and that no other call in this process
/// has handed out: two tests of one binary run at once, and Envoy binds its listeners with
/// `SO_REUSEPORT`, so two Envoys given the same port would both listen on it and share its
/// connections instead of one failing.
pub fn free_port() -> u16 {
    use std::collections::HashSet;
    use std::sync::Mutex;
    static HANDED_OUT: Mutex<Option<HashSet<u16>>> = Mutex::new(None);
    loop {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        let port = listener.local_addr().expect("local_addr").port();
        let mut handed_out = HANDED_OUT.lock().unwrap_or_else(|e| e.into_inner());
        if handed_out.get_or_insert_with(HashSet::new).insert(port) {
            return port;
        }
    }
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
