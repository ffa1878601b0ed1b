//! A CSI error as the pure decisions return it: a gRPC code and a message that names the
//! field and the fix. The services turn it into a `tonic::Status`.

use tonic::Code;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{code:?}: {message}")]
pub struct CsiError {
    pub code: Code,
    pub message: String,
}

impl CsiError {
    pub fn new(code: Code, message: impl Into<String>) -> Self {
        CsiError {
            code,
            message: message.into(),
        }
    }

    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(Code::InvalidArgument, message)
    }

    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(Code::NotFound, message)
    }

    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(Code::Internal, message)
    }

    pub fn unavailable(message: impl Into<String>) -> Self {
        Self::new(Code::Unavailable, message)
    }
}

impl From<CsiError> for tonic::Status {
    fn from(e: CsiError) -> Self {
        tonic::Status::new(e.code, e.message)
    }
}

/// The code stored in a LogicalVolume's `status.code` (gRPC's numbering, as TopoLVM).
pub fn code_from_i32(code: i32) -> Code {
    Code::from_i32(code)
}
