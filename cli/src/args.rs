//! Argument and environment parsing shared by the commands: options with short aliases,
//! durations with units, values from `REDLOCK_*` variables when the flag is absent.

use std::ffi::OsString;

/// A command-line argument that does not borrow the parser.
pub enum Opt {
    /// `--name` (or `--name=value`; the value is read with [`string`]).
    Long(String),
    /// `-c`.
    Short(char),
    /// A positional argument.
    Value(OsString),
}

/// The next argument, owned, with short options replaced by the long option they stand for
/// in `shorts` (`('t', "ttl")` turns `-t` into `--ttl`). Short options not in the table stay
/// short, and are reported as unknown by [`unexpected`].
pub fn next(p: &mut lexopt::Parser, shorts: &[(char, &str)]) -> Result<Option<Opt>, String> {
    Ok(p.next().map_err(|e| e.to_string())?.map(|a| match a {
        lexopt::Arg::Long(n) => Opt::Long(n.to_string()),
        lexopt::Arg::Short(c) => match shorts.iter().find(|(s, _)| *s == c) {
            Some((_, long)) => Opt::Long(long.to_string()),
            None => Opt::Short(c),
        },
        lexopt::Arg::Value(v) => Opt::Value(v),
    }))
}

/// The error for an argument a command does not take.
pub fn unexpected(o: &Opt) -> String {
    match o {
        Opt::Long(n) => format!("unknown option --{n}"),
        Opt::Short(c) => format!("unknown option -{c}"),
        Opt::Value(v) => format!("unexpected argument {:?}", v.to_string_lossy()),
    }
}

/// The value of option `name` (for example `--resource`), as UTF-8.
pub fn string(p: &mut lexopt::Parser, name: &str) -> Result<String, String> {
    p.value()
        .map_err(|e| format!("{name}: {e}"))?
        .into_string()
        .map_err(|_| format!("{name}: not valid UTF-8"))
}

/// The accepted forms of a duration, for error messages and help.
pub const DURATION_FORMS: &str =
    "a duration with a unit, such as 500ms, 10s, 1.5s, 2m, 1h or 1m30s (0 needs none)";

/// Parses a duration into milliseconds: one or more `<number><unit>` groups with the units
/// `ms`, `s`, `m` and `h` (`10s`, `1m30s`), where a number may have a decimal fraction
/// (`1.5s`, `0.25m`) as long as the total is a whole number of milliseconds. A bare number is
/// refused (it used to mean milliseconds, and `-t 10` read as ten seconds was a 10 ms lock),
/// except `0`, which means the same in every unit. Strict: no sign, no space, no other unit,
/// no overflow of a `u64` of milliseconds.
pub fn parse_duration(s: &str) -> Result<u64, String> {
    if s.is_empty() {
        return Err("empty".into());
    }
    if s.bytes().all(|b| b.is_ascii_digit()) {
        return match s.trim_start_matches('0') {
            "" => Ok(0),
            _ => Err(format!(
                "no unit: write {s}s for seconds or {s}ms for milliseconds"
            )),
        };
    }
    let mut total: u64 = 0;
    let mut rest = s;
    while !rest.is_empty() {
        let (ms, tail) = group(rest)?;
        total = total.checked_add(ms).ok_or("too large")?;
        rest = tail;
    }
    Ok(total)
}

/// The first `<number>[.<fraction>]<unit>` group of `s`, in milliseconds, and what follows.
fn group(s: &str) -> Result<(u64, &str), String> {
    let digits = s.bytes().take_while(u8::is_ascii_digit).count();
    if digits == 0 {
        return Err(if s.starts_with('-') {
            "negative"
        } else {
            "a number must come before each unit"
        }
        .into());
    }
    let whole: u64 = s[..digits].parse().map_err(|_| "too large")?;
    let mut rest = &s[digits..];
    let mut fraction = "";
    if let Some(after) = rest.strip_prefix('.') {
        let n = after.bytes().take_while(u8::is_ascii_digit).count();
        if n == 0 {
            return Err("a decimal point must have digits after it".into());
        }
        fraction = &after[..n];
        rest = &after[n..];
    }
    let unit_len = rest.bytes().take_while(u8::is_ascii_alphabetic).count();
    let per_unit: u64 = match &rest[..unit_len] {
        "ms" => 1,
        "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        "" => return Err("each number needs a unit (ms, s, m or h)".into()),
        _ => return Err("unknown unit (ms, s, m and h are accepted)".into()),
    };
    let mut ms = whole.checked_mul(per_unit).ok_or("too large")?;
    if !fraction.is_empty() {
        // The fraction's milliseconds, exactly: digits × unit / 10^len must be whole.
        let digits: u128 = fraction.parse().map_err(|_| "too many decimals")?;
        let scale = 10u128
            .checked_pow(fraction.len() as u32)
            .ok_or("too many decimals")?;
        let part = digits * u128::from(per_unit);
        if !part.is_multiple_of(scale) {
            return Err("finer than a millisecond".into());
        }
        let part = u64::try_from(part / scale).map_err(|_| "too large")?;
        ms = ms.checked_add(part).ok_or("too large")?;
    }
    Ok((ms, &rest[unit_len..]))
}

/// Milliseconds as the shortest exact duration text: `90s` for 90000, `1500ms` for 1500.
pub fn show_ms(ms: u64) -> String {
    match ms {
        0 => "0ms".into(),
        ms if ms % 3_600_000 == 0 => format!("{}h", ms / 3_600_000),
        ms if ms % 60_000 == 0 => format!("{}m", ms / 60_000),
        ms if ms % 1_000 == 0 => format!("{}s", ms / 1_000),
        ms => format!("{ms}ms"),
    }
}

/// A duration option's value; `name` (the flag or the variable) is named in the error.
pub fn duration(name: &str, v: &str) -> Result<u64, String> {
    parse_duration(v).map_err(|why| {
        format!("{name}: {v:?} is not a duration ({why}); expected {DURATION_FORMS}")
    })
}

/// The value of duration option `--name`.
pub fn duration_arg(p: &mut lexopt::Parser, name: &str) -> Result<u64, String> {
    let v = string(p, name)?;
    duration(name, &v)
}

/// The value of environment variable `var`, if set and not empty (an empty variable counts
/// as unset, so `REDLOCK_TTL= redlock run …` drops an exported value).
pub fn env(var: &str) -> Result<Option<String>, String> {
    match std::env::var_os(var) {
        None => Ok(None),
        Some(v) if v.is_empty() => Ok(None),
        Some(v) => v
            .into_string()
            .map(Some)
            .map_err(|_| format!("environment variable {var}: not valid UTF-8")),
    }
}

/// A duration from the flag if given, else from environment variable `var`.
pub fn duration_or_env(flag: Option<u64>, var: &str) -> Result<Option<u64>, String> {
    if flag.is_some() {
        return Ok(flag);
    }
    match env(var)? {
        Some(v) => duration(&format!("environment variable {var}"), &v).map(Some),
        None => Ok(None),
    }
}

/// An exit status, 0 to 255.
pub fn exit_status(name: &str, v: &str) -> Result<u8, String> {
    v.parse::<u8>()
        .map_err(|_| format!("{name}: expected an exit status from 0 to 255, got {v:?}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_with_units_and_bare_milliseconds() {
        for (text, ms) in [
            ("0", 0),
            ("000", 0),
            ("500ms", 500),
            ("1.5s", 1500),
            ("0.25m", 15_000),
            ("1.5h", 5_400_000),
            ("2.000ms", 2),
            ("1m0.5s", 60_500),
            ("10s", 10_000),
            ("2m", 120_000),
            ("1h", 3_600_000),
            ("1m30s", 90_000),
            ("1h1m1s1ms", 3_661_001),
            ("0s", 0),
            ("007s", 7000),
            ("18446744073709551615ms", u64::MAX),
        ] {
            assert_eq!(parse_duration(text), Ok(ms), "{text}");
        }
    }

    #[test]
    fn bad_durations_are_refused_with_a_reason() {
        for (text, why) in [
            ("", "empty"),
            ("10x", "unknown unit"),
            ("10S", "unknown unit"),
            ("10us", "unknown unit"),
            ("10sec", "unknown unit"),
            ("-5s", "negative"),
            ("-5", "negative"),
            ("+5s", "a number must come before"),
            ("s", "a number must come before"),
            (
                "10",
                "no unit: write 10s for seconds or 10ms for milliseconds",
            ),
            ("1500", "write 1500s for seconds or 1500ms"),
            ("1.5ms", "finer than a millisecond"),
            ("0.0001s", "finer than a millisecond"),
            ("1.s", "a decimal point must have digits"),
            (".5s", "a number must come before"),
            ("1.5", "each number needs a unit"),
            ("10s5", "each number needs a unit"),
            (" 10s", "a number must come before"),
            ("10s ", "a number must come before"),
            ("18446744073709551616ms", "too large"),
            ("5124095576030432h", "too large"),
            ("18446744073709551615ms1ms", "too large"),
        ] {
            match parse_duration(text) {
                Err(e) => assert!(e.contains(why), "{text:?}: {e}"),
                Ok(v) => panic!("{text:?} parsed as {v}"),
            }
        }
    }

    #[test]
    fn errors_name_the_flag_and_the_accepted_forms() {
        let e = duration("--ttl", "10x").unwrap_err();
        assert!(
            e.starts_with("--ttl: \"10x\" is not a duration (unknown unit"),
            "{e}"
        );
        assert!(e.contains("500ms, 10s, 1.5s, 2m, 1h"), "{e}");
    }

    #[test]
    fn durations_are_shown_in_their_shortest_exact_unit() {
        for (ms, text) in [
            (0, "0ms"),
            (1500, "1500ms"),
            (2000, "2s"),
            (90_000, "90s"),
            (120_000, "2m"),
            (7_200_000, "2h"),
        ] {
            assert_eq!(show_ms(ms), text);
            assert_eq!(parse_duration(text), Ok(ms));
        }
    }
}
