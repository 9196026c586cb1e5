//! The floor: a replay server that writes the exact responses axon sent, captured per view
//! and framed as HTTP/2 DATA frames before the run ([`h2raw`]), to the same simulated proxies. It answers the
//! first request of each type with that type's frame, ignores ACKs, and on a `push` line on
//! stdin writes all four frames to every open stream; `push TYPES NAMESPACES` (e.g.
//! `push rds ns-0,ns-3`) writes only those types to the streams of those namespaces: the
//! floor for the bytes an edit changes.
//!
//! Runs as its own process (`axon-load replay`), so that its CPU and RSS are measured like
//! axon's.

use std::collections::HashMap;
use std::io::{BufRead, Read, Write};
use std::path::Path;
use std::sync::Arc;

use bytes::Bytes;

use crate::wire;

mod h2raw;

/// Per view (a namespace): the four responses as gRPC payloads (absent types are `None`).
pub(crate) type Views = HashMap<String, [Option<Bytes>; 4]>;

/// The namespace of an Istio node id `TYPE~IP~POD.NS~DOMAIN`.
pub(crate) fn namespace_of(node_id: &str) -> Option<&str> {
    node_id.split('~').nth(2)?.split_once('.').map(|(_, ns)| ns)
}

pub(crate) fn write_views(path: &Path, views: &Views) -> std::io::Result<()> {
    let mut f = std::io::BufWriter::new(std::fs::File::create(path)?);
    f.write_all(&(views.len() as u32).to_le_bytes())?;
    for (key, msgs) in views {
        f.write_all(&(key.len() as u32).to_le_bytes())?;
        f.write_all(key.as_bytes())?;
        for m in msgs {
            match m {
                Some(b) => {
                    f.write_all(&(b.len() as u32).to_le_bytes())?;
                    f.write_all(b)?;
                }
                None => f.write_all(&u32::MAX.to_le_bytes())?,
            }
        }
    }
    f.flush()
}

pub(crate) fn read_views(path: &Path) -> anyhow::Result<Views> {
    let mut f = std::io::BufReader::new(std::fs::File::open(path)?);
    fn read_u32(f: &mut impl Read) -> std::io::Result<u32> {
        let mut b = [0u8; 4];
        f.read_exact(&mut b)?;
        Ok(u32::from_le_bytes(b))
    }
    fn read_vec(f: &mut impl Read, n: usize) -> std::io::Result<Vec<u8>> {
        let mut v = vec![0u8; n];
        f.read_exact(&mut v)?;
        Ok(v)
    }
    let n = read_u32(&mut f)?;
    let mut views = Views::new();
    for _ in 0..n {
        let k = read_u32(&mut f)? as usize;
        let key = String::from_utf8(read_vec(&mut f, k)?)?;
        let mut msgs: [Option<Bytes>; 4] = Default::default();
        for m in &mut msgs {
            let len = read_u32(&mut f)?;
            if len != u32::MAX {
                // Stored framed, ready to write.
                *m = Some(wire::grpc_frame(&read_vec(&mut f, len as usize)?));
            }
        }
        views.insert(key, msgs);
    }
    Ok(views)
}

/// What a `push` line re-sends: a type mask (bit per CDS, EDS, LDS, RDS) and the namespaces
/// (all when `None`).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct PushSpec {
    pub types: u8,
    pub namespaces: Option<Vec<String>>,
}

impl PushSpec {
    /// `push`, or `push TYPES NAMESPACES` with comma lists (`*` for every namespace).
    pub(crate) fn parse(line: &str) -> Option<PushSpec> {
        let mut words = line.split_whitespace();
        if words.next()? != "push" {
            return None;
        }
        let Some(types) = words.next() else {
            return Some(PushSpec {
                types: 0b1111,
                namespaces: None,
            });
        };
        let mut mask = 0u8;
        for t in types.split(',') {
            mask |= 1 << ["cds", "eds", "lds", "rds"].iter().position(|x| *x == t)?;
        }
        let namespaces = match words.next()? {
            "*" => None,
            list => Some(list.split(',').map(str::to_string).collect()),
        };
        Some(PushSpec {
            types: mask,
            namespaces,
        })
    }

    fn reaches(&self, namespace: &str) -> bool {
        self.namespaces
            .as_ref()
            .is_none_or(|list| list.iter().any(|n| n == namespace))
    }
}

/// Serves `views` on `addr` until stdin closes. Prints `replay listening ADDR`.
pub(crate) fn serve(
    views_path: &Path,
    addr: std::net::SocketAddr,
    delta: bool,
) -> anyhow::Result<()> {
    let views: h2raw::FramedViews = read_views(views_path)?
        .into_iter()
        .map(|(ns, msgs)| (ns, msgs.map(|m| m.map(h2raw::Frame::new))))
        .collect();
    let views = Arc::new(views);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    rt.block_on(async move {
        // The backlog axon's xDS listener has (the kernel caps it at somaxconn): with the
        // default of 1024, a storm's connects overflow it and wait for SYN retries.
        let socket = if addr.is_ipv4() {
            tokio::net::TcpSocket::new_v4()?
        } else {
            tokio::net::TcpSocket::new_v6()?
        };
        socket.set_reuseaddr(true)?;
        socket.bind(addr)?;
        let listener = socket.listen(4096)?;
        println!("replay listening {}", listener.local_addr()?);
        std::io::stdout().flush()?;
        let (push_tx, push_rx) = tokio::sync::watch::channel(Arc::new(PushSpec {
            types: 0,
            namespaces: None,
        }));
        // stdin: a `push` line re-sends everything to every stream; EOF stops.
        let (eof_tx, mut eof_rx) = tokio::sync::oneshot::channel::<()>();
        std::thread::spawn(move || {
            let stdin = std::io::stdin();
            for line in stdin.lock().lines() {
                let Ok(line) = line else { break };
                if let Some(spec) = PushSpec::parse(&line) {
                    push_tx.send_replace(Arc::new(spec));
                }
            }
            let _ = eof_tx.send(());
        });
        loop {
            tokio::select! {
                _ = &mut eof_rx => return Ok::<(), anyhow::Error>(()),
                accepted = listener.accept() => {
                    let (tcp, _) = accepted?;
                    let _ = tcp.set_nodelay(true);
                    let views = views.clone();
                    let push_rx = push_rx.clone();
                    tokio::spawn(async move {
                        // A client that leaves resets its connection: not an error here.
                        let _ = h2raw::connection(tcp, views, push_rx, delta).await;
                    });
                }
            }
        }
    })?;
    rt.shutdown_background();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn push_lines() {
        let all = PushSpec::parse("push").unwrap();
        assert_eq!((all.types, all.namespaces), (0b1111, None));
        let rds = PushSpec::parse("push rds ns-0,ns-3").unwrap();
        assert_eq!(rds.types, 0b1000);
        assert!(rds.reaches("ns-3") && !rds.reaches("ns-1"));
        assert_eq!(PushSpec::parse("push eds,cds *").unwrap().types, 0b0011);
        assert_eq!(PushSpec::parse("push xds *"), None);
        assert_eq!(PushSpec::parse("hello"), None);
    }
}
