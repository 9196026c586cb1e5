//! [`Relay`]: a TCP relay across network namespaces, the mesh's stand-in for pilot-agent's
//! XDS proxy (a listener in the pod on 127.0.0.1:15010, each connection relayed to axon on the
//! test's loopback) and the way the test reaches a sidecar's admin API (a listener on the
//! test's loopback, relayed to the pod's 127.0.0.1:15000). The listener is made wherever the
//! caller wants (in a namespace: `Netns::run`); `connect` makes the other side's connection.
//! Stopped on drop: the accept loop ends and every relayed connection is shut down.

use std::collections::HashMap;
use std::io;
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;

use crate::support::accept::Acceptor;

/// A running relay.
pub struct Relay {
    addr: SocketAddr,
    conns: Arc<Conns>,
    _acceptor: Acceptor,
}

/// The connections being relayed (a clone of each side), by a number of their own, so that
/// dropping the relay can shut them down.
#[derive(Default)]
struct Conns {
    next: AtomicU64,
    live: Mutex<HashMap<u64, [TcpStream; 2]>>,
}

impl Relay {
    /// Relays every connection `listener` accepts to a connection `connect` makes. `poke`
    /// connects to `listener` (from where it is reachable) to end the accept loop on drop.
    pub fn start(
        name: &str,
        listener: TcpListener,
        connect: impl Fn() -> io::Result<TcpStream> + Send + Sync + 'static,
        poke: impl Fn() + Send + Sync + 'static,
    ) -> Relay {
        let addr = listener.local_addr().expect("the relay's address");
        let conns: Arc<Conns> = Arc::default();
        let conns2 = conns.clone();
        let acceptor = Acceptor::spawn(&format!("relay-{name}"), listener, poke, move |down| {
            relay_one(down, &connect, &conns2)
        });
        Relay {
            addr,
            conns,
            _acceptor: acceptor,
        }
    }

    /// Where the relay listens (in its listener's namespace).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
}

/// Connects the other side and copies both ways until both are done.
fn relay_one(down: TcpStream, connect: &impl Fn() -> io::Result<TcpStream>, conns: &Conns) {
    let Ok(up) = connect() else {
        let _ = down.shutdown(Shutdown::Both);
        return;
    };
    let _ = up.set_nodelay(true);
    let _ = down.set_nodelay(true);
    let (Ok(down2), Ok(up2), Ok(down3), Ok(up3)) = (
        down.try_clone(),
        up.try_clone(),
        down.try_clone(),
        up.try_clone(),
    ) else {
        return;
    };
    let id = conns.next.fetch_add(1, Ordering::SeqCst);
    conns.live.lock().unwrap().insert(id, [down3, up3]);
    let upward = thread::spawn(move || copy_then_close(down2, up2));
    copy_then_close(up, down);
    let _ = upward.join();
    conns.live.lock().unwrap().remove(&id);
}

/// Copies `from` to `to`, then closes `to`'s writing side (the EOF passed on).
fn copy_then_close(mut from: TcpStream, mut to: TcpStream) {
    let _ = io::copy(&mut from, &mut to);
    let _ = to.shutdown(Shutdown::Write);
}

impl Drop for Relay {
    fn drop(&mut self) {
        for c in self.conns.live.lock().unwrap().values().flatten() {
            let _ = c.shutdown(Shutdown::Both);
        }
    }
}
