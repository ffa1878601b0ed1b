//! `--since` values: a duration back from now (`90s`, `15m`, `2h`, `7d`) or an RFC 3339 time.

/// Unix milliseconds for `s`, relative to `now_ms` for durations.
pub fn parse_since(s: &str, now_ms: u64) -> Result<u64, String> {
    let s = s.trim();
    if let Some(ms) = parse_duration_ms(s) {
        return Ok(now_ms.saturating_sub(ms));
    }
    parse_rfc3339_ms(s).ok_or_else(|| {
        format!("--since {s:?}: expected a duration such as 90s, 15m, 2h, 7d or an RFC 3339 time such as 2026-11-22T10:00:00Z")
    })
}

/// A flag value such as `500ms`, `30s`, `5m` (clap `value_parser`).
pub fn parse_duration(s: &str) -> Result<std::time::Duration, String> {
    parse_duration_ms(s.trim())
        .map(std::time::Duration::from_millis)
        .ok_or_else(|| format!("{s:?}: expected a duration such as 500ms, 30s or 5m"))
}

pub(crate) fn parse_duration_ms(s: &str) -> Option<u64> {
    let split = s.find(|c: char| !c.is_ascii_digit())?;
    let (num, unit) = s.split_at(split);
    let n: u64 = num.parse().ok()?;
    let mult = match unit {
        "ms" => 1,
        "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        _ => return None,
    };
    n.checked_mul(mult)
}

/// `YYYY-MM-DDTHH:MM:SS[.frac](Z|±HH:MM)`.
fn parse_rfc3339_ms(s: &str) -> Option<u64> {
    let b = s.as_bytes();
    if b.len() < 20
        || b[4] != b'-'
        || b[7] != b'-'
        || !matches!(b[10], b'T' | b't' | b' ')
        || b[13] != b':'
        || b[16] != b':'
    {
        return None;
    }
    let num = |r: std::ops::Range<usize>| s.get(r)?.parse::<i64>().ok();
    let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (h, mi, sec) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || sec > 60 {
        return None;
    }
    let mut rest = &s[19..];
    let mut frac_ms = 0i64;
    if let Some(r) = rest.strip_prefix('.') {
        let digits = r.find(|c: char| !c.is_ascii_digit()).unwrap_or(r.len());
        let f = &r[..digits];
        if f.is_empty() {
            return None;
        }
        frac_ms = format!("{f:0<3}")[..3].parse().ok()?;
        rest = &r[digits..];
    }
    let offset_min = match rest {
        "Z" | "z" => 0,
        _ => {
            let sign = match rest.as_bytes().first()? {
                b'+' => 1,
                b'-' => -1,
                _ => return None,
            };
            let (oh, om) = rest[1..].split_once(':')?;
            sign * (oh.parse::<i64>().ok()? * 60 + om.parse::<i64>().ok()?)
        }
    };
    let secs = days_from_civil(y, mo, d) * 86_400 + h * 3_600 + mi * 60 + sec - offset_min * 60;
    u64::try_from(secs * 1_000 + frac_ms).ok()
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_count_back_from_now() {
        assert_eq!(parse_since("90s", 100_000), Ok(10_000));
        assert_eq!(parse_since("2h", 10_000_000), Ok(10_000_000 - 7_200_000));
        assert_eq!(parse_since("1d", 1), Ok(0), "saturates at the epoch");
    }

    #[test]
    fn rfc3339_times() {
        assert_eq!(parse_since("1970-01-01T00:00:00Z", 0), Ok(0));
        assert_eq!(
            parse_since("2026-11-22T10:00:00Z", 0),
            Ok(1_795_341_600_000)
        );
        assert_eq!(
            parse_since("2026-11-22T11:00:00.5+01:00", 0),
            Ok(1_795_341_600_500)
        );
    }

    #[test]
    fn rejects_other_input_naming_the_flag() {
        let err = parse_since("yesterday", 0).unwrap_err();
        assert!(err.contains("--since") && err.contains("RFC 3339"), "{err}");
        assert!(parse_since("2026-13-01T00:00:00Z", 0).is_err());
    }
}
