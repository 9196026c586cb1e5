//! [`Acceptor`]: the accept loop of the harness's small servers (the echo upstream, a mesh
//! pod's apps, the mesh's relays): each connection served on a thread of its own until the
//! acceptor is dropped, when a connection made by its `poke` wakes the loop to see that it
//! must stop (a blocked `accept` cannot be interrupted portably).

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::Duration;

/// A running accept loop; stopped on drop.
pub struct Acceptor {
    stop: Arc<AtomicBool>,
    poke: Box<dyn Fn() + Send + Sync>,
}

impl Acceptor {
    /// Serves every connection `listener` accepts with `serve`, on a thread named
    /// `NAME-conn`. `poke` connects to the listener from wherever it is reachable.
    pub fn spawn(
        name: &str,
        listener: TcpListener,
        poke: impl Fn() + Send + Sync + 'static,
        serve: impl Fn(TcpStream) + Send + Sync + 'static,
    ) -> Acceptor {
        let stop = Arc::new(AtomicBool::new(false));
        let (stop2, serve) = (stop.clone(), Arc::new(serve));
        let conn_name = format!("{name}-conn");
        thread::Builder::new()
            .name(name.to_string())
            .spawn(move || {
                for conn in listener.incoming() {
                    if stop2.load(Ordering::SeqCst) {
                        break;
                    }
                    let Ok(conn) = conn else { continue };
                    let serve = serve.clone();
                    let _ = thread::Builder::new()
                        .name(conn_name.clone())
                        .spawn(move || serve(conn));
                }
            })
            .unwrap_or_else(|e| panic!("spawn {name}: {e}"));
        Acceptor {
            stop,
            poke: Box::new(poke),
        }
    }
}

/// The poke of a listener at `addr` in this process's own network namespace.
pub fn poke_at(addr: SocketAddr) -> impl Fn() + Send + Sync + 'static {
    move || {
        let _ = TcpStream::connect_timeout(&addr, Duration::from_secs(1));
    }
}

impl Drop for Acceptor {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        (self.poke)();
    }
}
