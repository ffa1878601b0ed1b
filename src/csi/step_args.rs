//! The journal boundary of the CSI services' typed steps: a step's fields become the intent's
//! `key=value` args (the journal format is unchanged), and replay reads them back, naming the
//! key an intent lacks.

/// An intent whose args lack what its action needs (a corrupt or hand-written record).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{action} intent has no {key}= argument")]
pub struct MissingArg {
    pub action: &'static str,
    pub key: &'static str,
}

/// `key=value`.
pub fn pair(key: &str, value: impl std::fmt::Display) -> String {
    format!("{key}={value}")
}

/// The value of `key` among `args`, if there.
pub fn lookup<'a>(args: &'a [String], key: &str) -> Option<&'a str> {
    args.iter()
        .find_map(|a| a.strip_prefix(key)?.strip_prefix('='))
}

/// The value of `key` among `args`, which `action`'s intents carry.
pub fn get(args: &[String], action: &'static str, key: &'static str) -> Result<String, MissingArg> {
    lookup(args, key)
        .map(str::to_string)
        .ok_or(MissingArg { action, key })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_may_hold_equals_signs_and_a_missing_key_is_named() {
        let args = vec![pair("note", "a=b, c"), pair("group", "g1")];
        assert_eq!(lookup(&args, "note"), Some("a=b, c"));
        assert_eq!(get(&args, "report-group-snapshot", "group").unwrap(), "g1");
        let e = get(&args, "report-group-snapshot", "size").unwrap_err();
        assert_eq!(
            e.to_string(),
            "report-group-snapshot intent has no size= argument"
        );
        // A key is matched whole, not as a prefix of another.
        assert_eq!(lookup(&[pair("sizeX", 1)], "size"), None);
    }
}
