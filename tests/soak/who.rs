//! The three processes: the operator and the two vg-managers.

use std::fmt;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Who {
    Operator,
    NodeA,
    NodeB,
}

impl Who {
    pub(crate) const ALL: [Who; 3] = [Who::Operator, Who::NodeA, Who::NodeB];

    pub(crate) fn idx(self) -> usize {
        match self {
            Who::Operator => 0,
            Who::NodeA => 1,
            Who::NodeB => 2,
        }
    }

    pub(crate) fn node(self) -> Option<&'static str> {
        match self {
            Who::Operator => None,
            Who::NodeA => Some("node-a"),
            Who::NodeB => Some("node-b"),
        }
    }
}

impl fmt::Display for Who {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.node().unwrap_or("operator"))
    }
}
