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
        self.0
            .format(&Rfc3339)
            .unwrap_or_else(|_| self.0.unix_timestamp().to_string())
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

    #[test]
    fn millis_round_trip() {
        let t = Timestamp::parse("2023-05-08T13:56:00.123Z").expect("parse");
        assert_eq!(Timestamp::from_unix_millis(t.unix_millis()), Some(t));
    }
}
