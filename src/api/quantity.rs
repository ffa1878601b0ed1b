//! Kubernetes resource quantities as byte counts (only what sizes of disks and chunks need).

use thiserror::Error;

#[derive(Debug, Error, PartialEq, Eq)]
pub enum QuantityError {
    #[error(
        "quantity {0:?} is not a whole number of bytes with an optional suffix (Ki, Mi, Gi, Ti, Pi, Ei, k, M, G, T, P, E)"
    )]
    Invalid(String),
    #[error("quantity {0:?} does not fit in 64 bits")]
    Overflow(String),
}

/// Parses `128Ki`, `1Gi`, `1G`, `65536` (and `1e3`-free decimal forms such as `1.5Gi`) into bytes.
/// Fractions that do not land on a whole byte are rejected rather than rounded silently.
pub fn parse_quantity_bytes(s: &str) -> Result<u64, QuantityError> {
    let invalid = || QuantityError::Invalid(s.to_string());
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, suffix) = t.split_at(split);
    let mult: u128 = match suffix {
        "" => 1,
        "Ki" => 1 << 10,
        "Mi" => 1 << 20,
        "Gi" => 1 << 30,
        "Ti" => 1 << 40,
        "Pi" => 1 << 50,
        "Ei" => 1 << 60,
        "k" => 1_000,
        "M" => 1_000_000,
        "G" => 1_000_000_000,
        "T" => 1_000_000_000_000,
        "P" => 1_000_000_000_000_000,
        "E" => 1_000_000_000_000_000_000,
        _ => return Err(invalid()),
    };
    let (int_part, frac_part) = match num.split_once('.') {
        Some((i, f)) => (i, f),
        None => (num, ""),
    };
    if int_part.is_empty() && frac_part.is_empty() {
        return Err(invalid());
    }
    if frac_part.len() > 18 {
        return Err(invalid());
    }
    let int: u128 = if int_part.is_empty() {
        0
    } else {
        int_part.parse().map_err(|_| invalid())?
    };
    let frac: u128 = if frac_part.is_empty() {
        0
    } else {
        frac_part.parse().map_err(|_| invalid())?
    };
    let scale = 10u128.pow(frac_part.len() as u32);
    let frac_bytes = frac
        .checked_mul(mult)
        .ok_or_else(|| QuantityError::Overflow(s.to_string()))?;
    if frac_bytes % scale != 0 {
        return Err(invalid());
    }
    let total = int
        .checked_mul(mult)
        .and_then(|v| v.checked_add(frac_bytes / scale))
        .ok_or_else(|| QuantityError::Overflow(s.to_string()))?;
    u64::try_from(total).map_err(|_| QuantityError::Overflow(s.to_string()))
}

/// Bytes as Kubernetes writes a binary-SI quantity: the largest binary suffix that divides it
/// exactly (`1Gi`, `300Mi`, `4Ki`), else the plain number.
pub fn format_binary(bytes: u64) -> String {
    const SUFFIXES: [(&str, u32); 6] = [
        ("Ei", 60),
        ("Pi", 50),
        ("Ti", 40),
        ("Gi", 30),
        ("Mi", 20),
        ("Ki", 10),
    ];
    if bytes == 0 {
        return "0".into();
    }
    for (suffix, shift) in SUFFIXES {
        if bytes.is_multiple_of(1u64 << shift) {
            return format!("{}{suffix}", bytes >> shift);
        }
    }
    bytes.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binary_format_round_trips() {
        for (bytes, text) in [
            (0, "0"),
            (1 << 30, "1Gi"),
            (300 << 20, "300Mi"),
            (4096, "4Ki"),
            (1536, "1536"),
            (3 << 40, "3Ti"),
        ] {
            assert_eq!(format_binary(bytes), text);
            assert_eq!(parse_quantity_bytes(text), Ok(bytes));
        }
    }

    #[test]
    fn binary_and_decimal_suffixes() {
        assert_eq!(parse_quantity_bytes("128Ki"), Ok(131_072));
        assert_eq!(parse_quantity_bytes("1Gi"), Ok(1 << 30));
        assert_eq!(parse_quantity_bytes("1G"), Ok(1_000_000_000));
        assert_eq!(parse_quantity_bytes("65536"), Ok(65_536));
        assert_eq!(parse_quantity_bytes("1.5Gi"), Ok(3 << 29));
    }

    #[test]
    fn rejects_garbage_and_partial_bytes() {
        assert!(parse_quantity_bytes("12Xi").is_err());
        assert!(parse_quantity_bytes("").is_err());
        assert!(parse_quantity_bytes("0.5").is_err());
        assert!(matches!(
            parse_quantity_bytes("100Ei"),
            Err(QuantityError::Overflow(_))
        ));
    }
}
