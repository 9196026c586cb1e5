//! The HTTP servers: [`monitoring`] (`/metrics`, `/healthz`, `/ready`, `/debug/syncz`) and
//! [`debug`] (istiod's debug endpoints). They ask actors by message only.

pub mod debug;
pub mod monitoring;
