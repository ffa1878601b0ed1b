//! Developer tooling shared by the tests, the demo and `lvms dev`: a real control plane on
//! loopback, its certificates, and CRD installation.

pub mod control_plane;
pub mod crds;
pub mod csi_peers;
pub mod deploy;
pub mod jaeger;
pub mod operator;
pub mod pki;
pub mod process;

pub use control_plane::{ControlPlane, ControlPlaneError, Options};
pub use process::Lifetime;
