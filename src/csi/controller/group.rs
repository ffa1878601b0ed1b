//! Volume group snapshots (CSI GroupController) as pure decisions: which members may be
//! snapshotted together. A group is taken at one instant on one node, by thin snapshots, so
//! every member must be a thin volume of one device class on one node; anything else is
//! refused with InvalidArgument naming the offending members and why.

use std::collections::BTreeMap;

use crate::csi::errors::CsiError;

/// What the controller knows of one requested member (from its LogicalVolume and the class).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    pub node: String,
    pub device_class: String,
    pub thin: bool,
}

/// The node and class every member shares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placement {
    pub node: String,
    pub device_class: String,
}

fn list<S: AsRef<str>>(ids: &[S]) -> String {
    ids.iter().map(AsRef::as_ref).collect::<Vec<_>>().join(", ")
}

/// Checks a CreateVolumeGroupSnapshot's members. `found` has an entry per requested id:
/// `None` when no volume has that id.
pub fn check_members(
    ids: &[String],
    found: &BTreeMap<String, Option<Member>>,
) -> Result<Placement, CsiError> {
    if ids.is_empty() {
        return Err(CsiError::invalid(
            "source_volume_ids is empty; name the volumes to snapshot together",
        ));
    }
    let mut seen = std::collections::BTreeSet::new();
    let dup: Vec<&str> = ids
        .iter()
        .filter(|id| !seen.insert(id.as_str()))
        .map(String::as_str)
        .collect();
    if !dup.is_empty() {
        return Err(CsiError::invalid(format!(
            "source_volume_ids names {} more than once",
            list(&dup)
        )));
    }
    let missing: Vec<&str> = ids
        .iter()
        .filter(|id| !matches!(found.get(*id), Some(Some(_))))
        .map(String::as_str)
        .collect();
    if !missing.is_empty() {
        return Err(CsiError::invalid(format!(
            "source_volume_ids: no topolvm.io volume {}",
            list(&missing)
        )));
    }
    let members: Vec<(&str, &Member)> = ids
        .iter()
        .filter_map(|id| Some((id.as_str(), found.get(id)?.as_ref()?)))
        .collect();
    let thick: Vec<String> = members
        .iter()
        .filter(|(_, m)| !m.thin)
        .map(|(id, m)| format!("{id} (class {})", m.device_class))
        .collect();
    if !thick.is_empty() {
        return Err(CsiError::invalid(format!(
            "{} on a thick class: a group is taken with thin snapshots; put every member on one thin class",
            list(&thick)
        )));
    }
    let by = |key: fn(&Member) -> &str| {
        let mut groups: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for (id, m) in &members {
            groups.entry(key(m)).or_default().push(id);
        }
        groups
    };
    // Members spread over several nodes or classes: name each one's.
    let spread = |groups: BTreeMap<&str, Vec<&str>>, what: &str, why: &str| {
        if groups.len() < 2 {
            return Ok(());
        }
        let detail: Vec<String> = groups
            .iter()
            .map(|(k, ids)| format!("{what} {k}: {}", list(ids)))
            .collect();
        Err(CsiError::invalid(format!(
            "members are on {} {what}s ({}); {why}",
            groups.len(),
            detail.join("; ")
        )))
    };
    spread(
        by(|m| m.node.as_str()),
        "node",
        "a group is snapshotted at one instant on one node",
    )?;
    spread(
        by(|m| m.device_class.as_str()),
        "class",
        "a group is one thin pool's",
    )?;
    let (_, first) = members[0];
    Ok(Placement {
        node: first.node.clone(),
        device_class: first.device_class.clone(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use tonic::Code;

    fn member(node: &str, class: &str, thin: bool) -> Option<Member> {
        Some(Member {
            node: node.into(),
            device_class: class.into(),
            thin,
        })
    }

    type Members<'a> = &'a [(&'a str, Option<Member>)];

    fn check(members: Members<'_>) -> Result<Placement, CsiError> {
        let ids: Vec<String> = members.iter().map(|(id, _)| id.to_string()).collect();
        let found = members
            .iter()
            .map(|(id, m)| (id.to_string(), m.clone()))
            .collect();
        check_members(&ids, &found)
    }

    #[test]
    fn thin_members_of_one_class_on_one_node_make_a_group() {
        assert_eq!(
            check(&[
                ("v1", member("a", "thin", true)),
                ("v2", member("a", "thin", true))
            ])
            .unwrap(),
            Placement {
                node: "a".into(),
                device_class: "thin".into()
            }
        );
    }

    #[test]
    fn refusals_name_the_offending_members_and_why() {
        let cases: [(Members<'_>, &[&str]); 4] = [
            (
                &[
                    ("v1", member("a", "thin", true)),
                    ("v2", member("b", "thin", true)),
                ],
                &["node a: v1", "node b: v2", "one node"],
            ),
            (
                &[
                    ("v1", member("a", "thin", true)),
                    ("v2", member("a", "thick", false)),
                ],
                &["v2 (class thick)", "thick class"],
            ),
            (
                &[
                    ("v1", member("a", "thin", true)),
                    ("v2", member("a", "thin2", true)),
                ],
                &["class thin: v1", "class thin2: v2"],
            ),
            (
                &[("v1", member("a", "thin", true)), ("gone", None)],
                &["gone"],
            ),
        ];
        for (members, words) in cases {
            let e = check(members).unwrap_err();
            assert_eq!(e.code, Code::InvalidArgument, "{e}");
            for w in words {
                assert!(e.message.contains(w), "{w:?} in {e}");
            }
        }
        assert!(
            check(&[])
                .unwrap_err()
                .message
                .contains("source_volume_ids")
        );
        let e = check(&[
            ("v1", member("a", "t", true)),
            ("v1", member("a", "t", true)),
        ]);
        assert!(e.unwrap_err().message.contains("more than once"));
    }
}
