//! A CSI name as the LogicalVolume's object name (TopoLVM lowercases the CO's name and uses
//! it as is): checked here, so a name the API server would refuse is the caller's
//! INVALID_ARGUMENT naming the field, not an INTERNAL carrying the API server's text.

use super::errors::CsiError;

/// Kubernetes' limit for a DNS-1123 subdomain, which object names are.
pub const MAX_LEN: usize = 253;

/// `value` lowercased, if it is then a valid object name; else the error naming `field`.
pub fn object_name(field: &str, value: &str) -> Result<String, CsiError> {
    if value.is_empty() {
        return Err(CsiError::invalid(format!(
            "{field} is empty; the CO names every volume and snapshot"
        )));
    }
    let name = value.to_lowercase();
    match problem(&name) {
        None => Ok(name),
        Some(why) => Err(CsiError::invalid(format!(
            "{field} {:?} cannot name a LogicalVolume: {why} (a DNS-1123 subdomain: at most {MAX_LEN} characters of a-z, 0-9, '-' and '.', starting and ending with a letter or digit)",
            truncated(value)
        ))),
    }
}

/// What makes `name` (already lowercased) no DNS-1123 subdomain, if anything.
fn problem(name: &str) -> Option<&'static str> {
    if name.len() > MAX_LEN {
        return Some("too long");
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '-' || *c == '.'))
    {
        return Some(if c.is_control() {
            "it holds a control character"
        } else {
            "it holds a character other than a-z, 0-9, '-' and '.'"
        });
    }
    let alnum = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric());
    if !alnum(name.chars().next()) || !alnum(name.chars().last()) {
        return Some("it must start and end with a letter or digit");
    }
    if name.split('.').any(|label| label.is_empty()) {
        return Some("it has an empty '.'-separated part");
    }
    None
}

/// At most 64 characters of `value` for the message (a 100 KiB name is not echoed whole).
fn truncated(value: &str) -> String {
    let mut out: String = value.chars().take(64).collect();
    if out.len() < value.len() {
        out.push('…');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use tonic::Code;

    #[test]
    fn what_csi_provisioner_sends_passes_lowercased() {
        assert_eq!(
            object_name("name", "pvc-0F1E2d3c-aaaa").unwrap(),
            "pvc-0f1e2d3c-aaaa"
        );
        assert_eq!(object_name("name", "snapshot-1.a").unwrap(), "snapshot-1.a");
        assert!(object_name("name", &"a".repeat(MAX_LEN)).is_ok());
    }

    #[test]
    fn names_no_object_can_have_are_invalid_arguments_naming_the_field() {
        for bad in [
            "../x",
            "-rf",
            "x-",
            "a..b",
            "a/b",
            "with space",
            "nul\0byte",
            "ünicode",
            &"a".repeat(MAX_LEN + 1),
            "",
        ] {
            let e = object_name("name", bad).unwrap_err();
            assert_eq!(e.code, Code::InvalidArgument, "{bad:?}");
            assert!(e.message.starts_with("name "), "{bad:?}: {}", e.message);
            assert!(e.message.len() < 400, "{bad:?}: message not bounded");
        }
    }
}
