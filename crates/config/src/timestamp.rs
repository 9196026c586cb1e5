//! `metadata.creationTimestamp`: an RFC 3339 time (`2024-05-01T10:00:00Z`, with fractional
//! seconds or an offset), read as nanoseconds since the Unix epoch. istiod orders configs by
//! it (then by name and namespace); axon reads it from files and Kubernetes objects alike.

/// Nanoseconds since the Unix epoch of an RFC 3339 time; `None` when it is not one.
pub fn parse_rfc3339(text: &str) -> Option<i64> {
    let b = text.as_bytes();
    if b.len() < 20 || b[4] != b'-' || b[7] != b'-' || !matches!(b[10], b'T' | b't' | b' ') {
        return None;
    }
    if b[13] != b':' || b[16] != b':' {
        return None;
    }
    let num = |from: usize, to: usize| -> Option<i64> {
        let s = text.get(from..to)?;
        s.bytes()
            .all(|c| c.is_ascii_digit())
            .then(|| s.parse().ok())?
    };
    let (year, month, day) = (num(0, 4)?, num(5, 7)?, num(8, 10)?);
    let (hour, minute, second) = (num(11, 13)?, num(14, 16)?, num(17, 19)?);
    if !(1..=12).contains(&month) || day < 1 || day > days_in_month(year, month) {
        return None;
    }
    if hour > 23 || minute > 59 || second > 60 {
        return None;
    }
    let mut rest = &text[19..];
    let mut nanos = 0i64;
    if let Some(frac) = rest.strip_prefix('.') {
        let digits = frac.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return None;
        }
        let kept = &frac[..digits.min(9)];
        nanos = kept.parse::<i64>().ok()? * 10i64.pow(9 - kept.len() as u32);
        rest = &frac[digits..];
    }
    let offset = match rest {
        "Z" | "z" => 0,
        _ => {
            let sign = match rest.as_bytes().first()? {
                b'+' => 1,
                b'-' => -1,
                _ => return None,
            };
            let r = rest.as_bytes();
            if r.len() != 6 || r[3] != b':' {
                return None;
            }
            let h: i64 = rest.get(1..3)?.parse().ok()?;
            let m: i64 = rest.get(4..6)?.parse().ok()?;
            if h > 23 || m > 59 {
                return None;
            }
            sign * (h * 3600 + m * 60)
        }
    };
    let days = days_from_civil(year, month, day);
    let seconds = days * 86_400 + hour * 3600 + minute * 60 + second - offset;
    seconds.checked_mul(1_000_000_000)?.checked_add(nanos)
}

fn days_in_month(year: i64, month: i64) -> i64 {
    match month {
        2 if year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days from 1970-01-01 to a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_times() {
        assert_eq!(parse_rfc3339("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(
            parse_rfc3339("2024-05-01T10:00:00Z"),
            Some(1_714_557_600 * 1_000_000_000)
        );
        assert_eq!(
            parse_rfc3339("2024-05-01T12:00:00.5+02:00"),
            Some(1_714_557_600 * 1_000_000_000 + 500_000_000)
        );
        assert_eq!(
            parse_rfc3339("2000-02-29T00:00:00Z"),
            Some(951_782_400 * 1_000_000_000)
        );
        for bad in [
            "",
            "2024-05-01",
            "2024-05-01T10:00:00",
            "2024-13-01T10:00:00Z",
            "2023-02-29T10:00:00Z",
            "2024-05-01T10:00:00.Z",
            "2024-05-01T10:00:00+0200",
            "yesterday at noon, more or less",
        ] {
            assert_eq!(parse_rfc3339(bad), None, "{bad}");
        }
    }
}
