//! Symlink resolution results (LVMS resolves every path with `filepath.EvalSymlinks`). The caller
//! does the I/O for each path `paths_to_resolve` lists; the pure code only looks results up.

use std::collections::BTreeMap;

use crate::api::DeviceSelector;

use crate::node::report::PhysicalVolume;

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ResolvedPaths {
    /// path -> Ok(kernel path) or Err(why it could not be resolved).
    entries: BTreeMap<String, Result<String, Unresolved>>,
}

impl ResolvedPaths {
    pub fn new() -> Self {
        Self::default()
    }

    /// `path` resolves to `target` (e.g. `/dev/disk/by-id/x` -> `/dev/sdb`).
    pub fn insert(&mut self, path: impl Into<String>, target: impl Into<String>) -> &mut Self {
        self.entries.insert(path.into(), Ok(target.into()));
        self
    }

    /// `path` could not be resolved; `error` is kept for status messages (e.g. "lstat ...: no
    /// such file or directory").
    pub fn insert_error(&mut self, path: impl Into<String>, error: impl Into<String>) -> &mut Self {
        self.entries
            .insert(path.into(), Err(Unresolved::Lookup(error.into())));
        self
    }

    /// Identity entries (`/dev/loop0` -> `/dev/loop0`), for paths that are already kernel names.
    pub fn identity<'a>(paths: impl IntoIterator<Item = &'a str>) -> Self {
        let mut r = Self::new();
        for p in paths {
            r.insert(p, p);
        }
        r
    }

    pub fn resolve(&self, path: &str) -> Result<&str, ResolveError> {
        match self.entries.get(path) {
            Some(Ok(t)) => Ok(t.as_str()),
            Some(Err(e)) => Err(ResolveError {
                path: path.to_string(),
                reason: e.clone(),
            }),
            None => Err(ResolveError {
                path: path.to_string(),
                reason: Unresolved::NotLookedUp,
            }),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{path}: {reason}")]
pub struct ResolveError {
    pub path: String,
    pub reason: Unresolved,
}

/// Why a path has no kernel path.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Unresolved {
    /// The host's lookup failed: the I/O error's text (e.g. "lstat ...: no such file or
    /// directory"), kept for status messages.
    #[error("{0}")]
    Lookup(String),
    /// The caller did not look the path up (it was not in [`paths_to_resolve`]).
    #[error("the path was not looked up on the host")]
    NotLookedUp,
}

/// Every path the pure code will ask about: the selector's paths and optionalPaths, and the PV
/// names lvm reports (`/dev/mapper/x` must be compared as `/dev/dm-N`).
pub fn paths_to_resolve(selector: Option<&DeviceSelector>, pvs: &[PhysicalVolume]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut push = |p: &str| {
        if !p.is_empty() && !out.iter().any(|o| o == p) {
            out.push(p.to_string());
        }
    };
    if let Some(s) = selector {
        s.paths.iter().for_each(|p| push(p));
        s.optional_paths.iter().for_each(|p| push(p));
    }
    pvs.iter().for_each(|p| push(&p.pv_name));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lookups_distinguish_resolved_failed_and_unknown() {
        let mut r = ResolvedPaths::new();
        r.insert("/dev/disk/by-id/wwn-1", "/dev/sdb")
            .insert_error("/dev/nope", "lstat /dev/nope: no such file or directory");
        assert_eq!(r.resolve("/dev/disk/by-id/wwn-1"), Ok("/dev/sdb"));
        let e = r.resolve("/dev/nope").unwrap_err();
        assert_eq!(
            e.to_string(),
            "/dev/nope: lstat /dev/nope: no such file or directory"
        );
        assert!(r.resolve("/dev/other").is_err());
        assert_eq!(
            ResolvedPaths::identity(["/dev/loop0"]).resolve("/dev/loop0"),
            Ok("/dev/loop0")
        );
    }

    #[test]
    fn lists_selector_paths_and_pv_names_once() {
        let sel = DeviceSelector {
            paths: vec!["/dev/sdb".into(), "/dev/disk/by-id/x".into()],
            optional_paths: vec!["/dev/sdb".into(), "/dev/sdc".into()],
            force_wipe_devices_and_destroy_all_data: None,
        };
        let pvs = vec![PhysicalVolume {
            pv_name: "/dev/mapper/luks".into(),
            ..Default::default()
        }];
        assert_eq!(
            paths_to_resolve(Some(&sel), &pvs),
            vec![
                "/dev/sdb",
                "/dev/disk/by-id/x",
                "/dev/sdc",
                "/dev/mapper/luks"
            ]
        );
        assert_eq!(paths_to_resolve(None, &[]), Vec::<String>::new());
    }
}
