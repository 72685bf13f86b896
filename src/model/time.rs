//! UTC timestamps with millisecond-or-finer precision, parsed from and rendered as RFC 3339.
//!
//! Invariants: a `Timestamp` is always UTC; ordering and `unix_millis` agree; rendering
//! round-trips through parsing.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

/// A point in time, always held in UTC.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp(OffsetDateTime);

impl utoipa::PartialSchema for Timestamp {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        use utoipa::openapi::schema::{KnownFormat, ObjectBuilder, SchemaFormat, Type};
        ObjectBuilder::new()
            .schema_type(Type::String)
            .format(Some(SchemaFormat::KnownFormat(KnownFormat::DateTime)))
            .description(Some("RFC 3339 date-time, normalised to UTC"))
            .into()
    }
}

impl utoipa::ToSchema for Timestamp {}

impl Timestamp {
    /// The current time.
    pub fn now() -> Self {
        Timestamp(OffsetDateTime::now_utc())
    }

    /// Parses RFC 3339 (any offset) and converts to UTC.
    pub fn parse(s: &str) -> Option<Self> {
        OffsetDateTime::parse(s, &Rfc3339)
            .ok()
            .map(|t| Timestamp(t.to_offset(time::UtcOffset::UTC)))
    }

    /// From unix milliseconds.
    pub fn from_unix_millis(ms: i64) -> Option<Self> {
        OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000)
            .ok()
            .map(Timestamp)
    }

    /// Unix milliseconds (floor).
    pub fn unix_millis(self) -> i64 {
        let nanos = self.0.unix_timestamp_nanos();
        i64::try_from(nanos.div_euclid(1_000_000)).unwrap_or(i64::MAX)
    }

    /// Unix nanoseconds, saturating at the `i64` range (years 1677 to 2262): ordering agrees
    /// with the timestamps' whenever either lies within that range.
    pub fn unix_nanos_saturating(self) -> i64 {
        let nanos = self.0.unix_timestamp_nanos();
        i64::try_from(nanos).unwrap_or(if nanos < 0 { i64::MIN } else { i64::MAX })
    }

    /// RFC 3339 text in UTC, e.g. `2026-06-17T09:20:00Z`.
    pub fn to_rfc3339(self) -> String {
        let mut out = String::with_capacity(30);
        self.write_rfc3339(&mut out);
        out
    }

    /// Appends [`Timestamp::to_rfc3339`]'s text to `out`: written digit by digit for years
    /// 0 to 9999 (fraction digits as `time` writes them: none for a whole second, else
    /// trailing zeros dropped), formatted by `time` otherwise.
    pub fn write_rfc3339(self, out: &mut String) {
        let t = self.0;
        let year = t.year();
        if !(0..=9999).contains(&year) || !t.offset().is_utc() {
            out.push_str(
                &t.format(&Rfc3339)
                    .unwrap_or_else(|_| t.unix_timestamp().to_string()),
            );
            return;
        }
        // `YYYY-MM-DDTHH:MM:SS`, then `.` and up to nine fraction digits, then `Z`.
        let mut buf = *b"0000-00-00T00:00:00.000000000Z";
        let put = |buf: &mut [u8; 30], at: usize, width: usize, mut v: u32| {
            for i in (at..at + width).rev() {
                buf[i] = b'0' + (v % 10) as u8;
                v /= 10;
            }
        };
        put(&mut buf, 0, 4, year.unsigned_abs());
        put(&mut buf, 5, 2, u32::from(u8::from(t.month())));
        put(&mut buf, 8, 2, u32::from(t.day()));
        put(&mut buf, 11, 2, u32::from(t.hour()));
        put(&mut buf, 14, 2, u32::from(t.minute()));
        put(&mut buf, 17, 2, u32::from(t.second()));
        let nanos = t.nanosecond();
        let end = if nanos == 0 {
            19
        } else {
            put(&mut buf, 20, 9, nanos);
            let mut end = 29;
            while buf[end - 1] == b'0' {
                end -= 1;
            }
            end
        };
        // Every byte written is an ASCII digit or separator, so always UTF-8.
        out.push_str(std::str::from_utf8(&buf[..end]).unwrap_or_default());
        out.push('Z');
    }

    /// This time shifted by a signed number of milliseconds (saturating at the representable range).
    pub fn plus_millis(self, ms: i64) -> Self {
        self.0
            .checked_add(time::Duration::milliseconds(ms))
            .map(Timestamp)
            .unwrap_or(self)
    }
}

impl Serialize for Timestamp {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_rfc3339())
    }
}

impl<'de> Deserialize<'de> for Timestamp {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Timestamp::parse(&s).ok_or_else(|| serde::de::Error::custom("expected an RFC 3339 time"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_offsets_into_utc_and_renders_z() {
        let t = Timestamp::parse("2026-06-17T11:20:00+02:00").expect("parse");
        assert_eq!(t.to_rfc3339(), "2026-06-17T09:20:00Z");
        assert_eq!(Timestamp::parse(&t.to_rfc3339()), Some(t));
    }

    #[test]
    fn rejects_non_rfc3339() {
        for bad in ["2026-06-17", "yesterday", "2026-06-17 09:20:00", ""] {
            assert!(Timestamp::parse(bad).is_none(), "{bad}");
        }
    }

    /// The digit-by-digit writer agrees with `time`'s RFC 3339 formatting everywhere,
    /// whole seconds, every fraction length and years outside 0 to 9999 included.
    #[test]
    fn written_digits_equal_times_formatting() {
        use proptest::prelude::*;
        let reference = |t: Timestamp| t.0.format(&Rfc3339).expect("format");
        let lo = OffsetDateTime::parse("0000-01-01T00:00:00Z", &Rfc3339)
            .expect("parse")
            .unix_timestamp_nanos();
        let hi = OffsetDateTime::parse("9999-12-31T23:59:59.999999999Z", &Rfc3339)
            .expect("parse")
            .unix_timestamp_nanos();
        let at = |n: i128| Timestamp(OffsetDateTime::from_unix_timestamp_nanos(n).expect("time"));
        for n in [
            lo,
            hi,
            0,
            1,
            10,
            100_000_000,
            123_000_000,
            999_999_999,
            1_000_000_000,
        ] {
            assert_eq!(at(n).to_rfc3339(), reference(at(n)), "{n}");
        }
        // Whole seconds, milliseconds and nanoseconds, over the writer's range.
        let strategy = (lo..=hi, 0u8..3).prop_map(|(n, grain)| match grain {
            0 => n - n.rem_euclid(1_000_000_000),
            1 => n - n.rem_euclid(1_000_000),
            _ => n,
        });
        proptest!(|(n in strategy)| {
            prop_assert_eq!(at(n).to_rfc3339(), reference(at(n)));
        });
        // Before year 0, `time` has no RFC 3339 text: the unix seconds stand in, as before.
        let before = Timestamp(OffsetDateTime::from_unix_timestamp(-62_200_000_000).expect("time"));
        assert!(before.0.year() < 0);
        assert_eq!(before.to_rfc3339(), "-62200000000");
    }

    #[test]
    fn millis_round_trip() {
        let t = Timestamp::parse("2023-05-08T13:56:00.123Z").expect("parse");
        assert_eq!(Timestamp::from_unix_millis(t.unix_millis()), Some(t));
    }
}
