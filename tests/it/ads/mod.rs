//! The ADS server as a client sees it: the protocol, Delta, limits, buffers, hostile clients, replicas.

mod buffers;
mod delta;
mod hostile;
mod limits;
mod protocol;
mod replicas;
