//! A strict reader of the Prometheus / OpenMetrics text format, for checking what `/metrics`
//! serves (unit tests and the end-to-end scrapes). Strict on purpose: a line a scraper would
//! reject, or a sample of an undeclared family, is an error naming the line.

use std::collections::BTreeMap;

use thiserror::Error;

#[derive(Debug, Error, PartialEq, Eq)]
#[error("metrics text line {line}: {reason}: {text:?}")]
pub struct ExpositionError {
    pub line: usize,
    pub reason: String,
    pub text: String,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Sample {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub value: f64,
}

/// Every sample, and each family's declared type.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Exposition {
    pub types: BTreeMap<String, String>,
    pub samples: Vec<Sample>,
}

impl Exposition {
    /// The value of the sample with exactly these labels.
    pub fn value(&self, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        let want: BTreeMap<String, String> = labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        self.samples
            .iter()
            .find(|s| s.name == name && s.labels == want)
            .map(|s| s.value)
    }

    /// Samples of one name (any labels).
    pub fn named<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a Sample> + 'a {
        self.samples.iter().filter(move |s| s.name == name)
    }

    /// The declared type of a family (`counter`, `gauge`, `histogram`, ...).
    pub fn kind(&self, family: &str) -> Option<&str> {
        self.types.get(family).map(String::as_str)
    }
}

/// Suffixes a sample may add to its family's name, by type.
fn suffixes(kind: &str) -> &'static [&'static str] {
    match kind {
        "counter" => &["_total", "_created"],
        "histogram" | "gaugehistogram" => {
            &["_bucket", "_count", "_sum", "_created", "_gcount", "_gsum"]
        }
        "summary" => &["_count", "_sum", "_created"],
        "info" => &["_info"],
        _ => &[],
    }
}

fn valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == ':')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
}

fn parse_value(text: &str) -> Option<f64> {
    match text {
        "+Inf" | "Inf" => Some(f64::INFINITY),
        "-Inf" => Some(f64::NEG_INFINITY),
        "NaN" => Some(f64::NAN),
        t => t.parse::<f64>().ok().filter(|_| {
            // Rust also reads "inf"/"infinity"; the format does not.
            t.bytes()
                .all(|b| b.is_ascii_digit() || matches!(b, b'.' | b'-' | b'+' | b'e' | b'E'))
        }),
    }
}

/// What is wrong with a sample's `{...}` labels (the reason of its [`ExpositionError`]).
#[derive(Debug, Error, PartialEq, Eq)]
enum LabelError {
    #[error("a label without =\"value\"")]
    NoValue,
    #[error("label name {0:?} is not valid")]
    InvalidName(String),
    #[error("an unterminated label value")]
    Unterminated,
    #[error("a bad escape in a label value")]
    BadEscape,
    #[error("label {0:?} given twice")]
    Duplicate(String),
    #[error("labels must be separated by ','")]
    NoSeparator,
}

/// `{k="v",...}` → labels, and the rest of the line after `}`.
fn parse_labels(text: &str) -> Result<(BTreeMap<String, String>, &str), LabelError> {
    let mut labels = BTreeMap::new();
    let mut rest = text;
    loop {
        rest = rest.trim_start_matches(',');
        if let Some(after) = rest.strip_prefix('}') {
            return Ok((labels, after));
        }
        let (key, after) = rest.split_once("=\"").ok_or(LabelError::NoValue)?;
        if !valid_name(key) {
            return Err(LabelError::InvalidName(key.to_string()));
        }
        let mut value = String::new();
        let mut chars = after.char_indices();
        let end = loop {
            match chars.next() {
                None => return Err(LabelError::Unterminated),
                Some((i, '"')) => break i,
                Some((_, '\\')) => match chars.next() {
                    Some((_, '\\')) => value.push('\\'),
                    Some((_, '"')) => value.push('"'),
                    Some((_, 'n')) => value.push('\n'),
                    _ => return Err(LabelError::BadEscape),
                },
                Some((_, c)) => value.push(c),
            }
        };
        if labels.insert(key.to_string(), value).is_some() {
            return Err(LabelError::Duplicate(key.to_string()));
        }
        rest = &after[end + 1..];
        if !(rest.starts_with(',') || rest.starts_with('}')) {
            return Err(LabelError::NoSeparator);
        }
    }
}

/// Parse a whole exposition. Every sample must belong to a family declared by an earlier
/// `# TYPE` line, and `# EOF`, when present, must be the last line.
pub fn parse(text: &str) -> Result<Exposition, ExpositionError> {
    let mut out = Exposition::default();
    let mut eof = false;
    for (i, line) in text.lines().enumerate() {
        let err = |reason: &str| ExpositionError {
            line: i + 1,
            reason: reason.to_string(),
            text: line.to_string(),
        };
        if eof {
            return Err(err("text after # EOF"));
        }
        if line.is_empty() {
            continue;
        }
        if let Some(comment) = line.strip_prefix("# ") {
            let mut parts = comment.splitn(3, ' ');
            match (parts.next(), parts.next(), parts.next()) {
                (Some("EOF"), None, None) => eof = true,
                (Some("TYPE"), Some(name), Some(kind)) if valid_name(name) => {
                    if out.types.insert(name.into(), kind.into()).is_some() {
                        return Err(err("a family declared twice"));
                    }
                }
                (Some("HELP" | "UNIT"), Some(name), _) if valid_name(name) => {}
                _ => return Err(err("an unknown comment")),
            }
            continue;
        }
        let name_end = line
            .find(['{', ' '])
            .ok_or_else(|| err("a sample without a value"))?;
        let name = &line[..name_end];
        if !valid_name(name) {
            return Err(err("a sample name that is not valid"));
        }
        let (labels, rest) = match line[name_end..].strip_prefix('{') {
            Some(l) => parse_labels(l).map_err(|r| err(&r.to_string()))?,
            None => (BTreeMap::new(), &line[name_end..]),
        };
        let value_text = rest
            .strip_prefix(' ')
            .ok_or_else(|| err("no space before the value"))?;
        let value = parse_value(value_text).ok_or_else(|| err("a value that is not a float"))?;
        let declared = out.types.iter().any(|(family, kind)| {
            name == family
                || suffixes(kind)
                    .iter()
                    .any(|s| name.strip_suffix(s) == Some(family.as_str()))
        });
        if !declared {
            return Err(err("a sample of a family without # TYPE"));
        }
        out.samples.push(Sample {
            name: name.to_string(),
            labels,
            value,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_counters_histograms_and_gauges() {
        let text = "# HELP a_total things\n# TYPE a counter\na_total{unit=\"x\",reason=\"q\\\"uote\"} 3\n\
                    # TYPE h_seconds histogram\n# UNIT h_seconds seconds\n\
                    h_seconds_bucket{le=\"+Inf\"} 2\nh_seconds_sum 0.5\nh_seconds_count 2\n\
                    # TYPE g gauge\ng 1.5e3\n# EOF\n";
        let e = parse(text).unwrap();
        assert_eq!(
            e.value("a_total", &[("unit", "x"), ("reason", "q\"uote")]),
            Some(3.0)
        );
        assert_eq!(e.value("h_seconds_bucket", &[("le", "+Inf")]), Some(2.0));
        assert_eq!(e.value("g", &[]), Some(1500.0));
        assert_eq!(e.kind("h_seconds"), Some("histogram"));
    }

    #[test]
    fn rejects_what_a_scraper_would() {
        for bad in [
            "x 1\n",                                  // no # TYPE
            "# TYPE x gauge\nx one\n",                // not a float
            "# TYPE x gauge\nx{a=\"1\" 1\n",          // unterminated labels
            "# TYPE x gauge\nx{a=1} 1\n",             // unquoted label value
            "# TYPE x gauge\nx  1\n",                 // two spaces
            "# TYPE x gauge\nx_total 1\n",            // a gauge has no _total
            "# TYPE x gauge\n# EOF\nx 1\n",           // after EOF
            "# TYPE x gauge\n# whatever\n",           // stray comment
            "# TYPE x gauge\nx{a=\"1\",a=\"2\"} 1\n", // duplicate label
            "# TYPE x gauge\nx inf\n",                // Rust's spelling, not the format's
        ] {
            assert!(parse(bad).is_err(), "{bad:?} was accepted");
        }
    }
}
