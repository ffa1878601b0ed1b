//! The steps operator units journal: writes of Kubernetes objects. Stored by name in each
//! intent; replay parses the name back.

use lvms_journal::Action;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ObjectAction {
    /// Server-side apply of a desired object (the digest is the desired state's).
    Apply,
    Delete,
    /// Finalizer edits (args: the finalizer names).
    AddFinalizer,
    RemoveFinalizer,
    /// Annotations taken off (args: their keys): a gone node's wiped-devices marker.
    RemoveAnnotation,
    /// An LVMCluster refused (status Failed and a Warning; args: the reason).
    Reject,
}

impl Action for ObjectAction {
    const ALL: &'static [Self] = &[
        Self::Apply,
        Self::Delete,
        Self::AddFinalizer,
        Self::RemoveFinalizer,
        Self::RemoveAnnotation,
        Self::Reject,
    ];

    fn name(self) -> &'static str {
        match self {
            Self::Apply => "apply",
            Self::Delete => "delete",
            Self::AddFinalizer => "add-finalizer",
            Self::RemoveFinalizer => "remove-finalizer",
            Self::RemoveAnnotation => "remove-annotation",
            Self::Reject => "reject",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_action_parses_back_from_its_stored_name() {
        for a in ObjectAction::ALL {
            assert_eq!(ObjectAction::parse(a.name()), Some(*a));
        }
        assert_eq!(ObjectAction::parse("Apply"), None);
    }
}
