//! The volume group snapshot check (pure): a writer appends record n to the data volume
//! (even n) or the wal volume (odd n), each durable before the next is written; a restored pair
//! is one line `tag last_data last_wal data_records wal_records` (-1: no record).

/// Consistent when each file holds its records in order (data the even ones, wal the odd ones)
/// and their last records are neighbours: nothing on one volume is missing its predecessor on
/// the other. Returns the last records, or why the pair is not consistent.
pub fn consistent(line: &str) -> Result<(i64, i64), String> {
    let f: Vec<i64> = line
        .split_whitespace()
        .skip(1)
        .map(|x| x.parse().unwrap_or(i64::MIN))
        .collect();
    let [a, b, na, nb] = f[..] else {
        return Err(format!("unreadable round {line:?}"));
    };
    let in_order = a % 2 == 0 && na == (a + 2) / 2 && (b == -1 || b % 2 == 1) && nb == (b + 1) / 2;
    if in_order && (a - b).abs() == 1 {
        Ok((a, b))
    } else {
        Err(format!(
            "INCONSISTENT {line:?}: data ends at {a} ({na} records), wal at {b} ({nb})"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::consistent;

    #[test]
    fn a_pair_is_consistent_only_when_its_last_records_are_neighbours() {
        assert_eq!(consistent("1 10 9 6 5"), Ok((10, 9)));
        assert_eq!(consistent("1 10 11 6 6"), Ok((10, 11)));
        assert_eq!(consistent("1 0 -1 1 0"), Ok((0, -1)));
        assert!(consistent("1 10 7 6 4").is_err(), "wal lost record 9");
        assert!(consistent("1 12 9 7 5").is_err(), "data ran ahead");
        assert!(consistent("1 10 9 5 5").is_err(), "a gap inside data");
        assert!(consistent("1 x").is_err());
    }
}
