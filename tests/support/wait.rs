//! Waiting on conditions and picking ports: [`wait_until`] (the one way tests wait: poll a
//! condition against a deadline, never a fixed sleep) and [`free_port`].

use std::net::TcpListener;
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

/// A port that was free on 127.0.0.1 a moment ago.
pub fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
    listener.local_addr().expect("local_addr").port()
}
