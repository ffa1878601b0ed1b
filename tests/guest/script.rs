//! A guest job's script: a program from `tests/guest/scripts/` (embedded with `include_str!`)
//! after a short header that exports its variables and defines the functions it calls (the
//! scenario's own parts, themselves files of that directory). Each file names what it expects
//! in its opening comment; `tests/guest_scripts.rs` checks them with `dash -n` and shellcheck.

use std::fmt::Write as _;

/// The header being built; [`Script::then`] appends the program.
#[derive(Default)]
pub struct Script(String);

impl Script {
    pub fn new() -> Self {
        Self::default()
    }

    /// `export NAME='value'`, the value quoted for the shell whatever it holds.
    pub fn var(mut self, name: &str, value: impl std::fmt::Display) -> Self {
        assert!(
            !name.is_empty()
                && !name.starts_with(|c: char| c.is_ascii_digit())
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'),
            "not a shell variable name: {name:?}"
        );
        let _ = writeln!(self.0, "export {name}={}", quote(&value.to_string()));
        self
    }

    /// `name() { body }`: `body` (a script file's text) runs when the program calls `name`;
    /// an empty one does nothing.
    pub fn func(mut self, name: &str, body: &str) -> Self {
        if body.trim().is_empty() {
            let _ = writeln!(self.0, "{name}() {{ :; }}");
        } else {
            let _ = write!(self.0, "{name}() {{\n{body}");
            if !body.ends_with('\n') {
                self.0.push('\n');
            }
            self.0.push_str("}\n");
        }
        self
    }

    /// The whole script: the header, then `program`.
    pub fn then(self, program: &str) -> String {
        self.0 + program
    }
}

/// `s` as one shell word: single-quoted, each `'` written as `'\''`.
pub fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}
