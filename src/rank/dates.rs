//! Dates a query names ("in July 2023", "on 13 October, 2023", "October 13th", "in 2022",
//! "in June"), for the ranking's date signal: an event whose `occurredAt` falls on a date
//! the query names is lifted, never filtered.
//!
//! Invariants: pure (no clock: "last May" or "two weeks ago" need a reference date and are
//! not read); a date is only as precise as the query says it (a month without a year matches
//! that month of every year); "May" and "March" count as months only when capitalised, so
//! "what may she..." names no date; an event's date is taken in UTC, like `occurredAt`.

use time::{Date, Month, OffsetDateTime};

/// One date a query names: each part it leaves out matches any value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NamedDate {
    /// Year.
    pub year: Option<i32>,
    /// Month, 1–12.
    pub month: Option<u8>,
    /// Day of the month, 1–31.
    pub day: Option<u8>,
}

impl NamedDate {
    /// Whether an event that occurred at `occurred_ms` (unix milliseconds) falls on this date.
    pub fn matches(&self, occurred_ms: i64) -> bool {
        utc_date(occurred_ms).is_some_and(|at| self.covers(at))
    }

    fn covers(&self, at: Date) -> bool {
        self.year.is_none_or(|y| y == at.year())
            && self.month.is_none_or(|m| m == u8::from(at.month()))
            && self.day.is_none_or(|d| d == at.day())
    }
}

/// The dates `query` names, in the order they appear.
pub fn named_dates(query: &str) -> Vec<NamedDate> {
    let tokens: Vec<&str> = query
        .split(|c: char| !c.is_alphanumeric())
        .filter(|t| !t.is_empty())
        .collect();
    let mut out = Vec::new();
    let mut used = vec![false; tokens.len()];
    for i in 0..tokens.len() {
        let Some((month, abbreviated)) = month_of(tokens[i]) else {
            continue;
        };
        let mut date = NamedDate {
            year: None,
            month: Some(month),
            day: None,
        };
        let mut taken = vec![i];
        let mut next = i + 1;
        if let Some(day) = tokens.get(next).and_then(|t| day_of(t)) {
            date.day = Some(day);
            taken.push(next);
            next += 1;
        } else if let Some(p) = i.checked_sub(1).filter(|&p| !used[p]) {
            if let Some(day) = day_of(tokens[p]) {
                date.day = Some(day);
                taken.push(p);
            }
        }
        if let Some(year) = tokens.get(next).and_then(|t| year_of(t)) {
            date.year = Some(year);
            taken.push(next);
        }
        // "Jan" or "Dec" alone is as likely a name or a word as a month.
        if abbreviated && taken.len() == 1 {
            continue;
        }
        for t in taken {
            used[t] = true;
        }
        out.push(date);
    }
    for (i, t) in tokens.iter().enumerate() {
        if let Some(year) = year_of(t).filter(|_| !used[i]) {
            out.push(NamedDate {
                year: Some(year),
                month: None,
                day: None,
            });
        }
    }
    out
}

/// Whether `occurred_ms` falls on any of `dates` (its UTC date taken once).
pub fn on_any(dates: &[NamedDate], occurred_ms: i64) -> bool {
    !dates.is_empty() && utc_date(occurred_ms).is_some_and(|at| dates.iter().any(|d| d.covers(at)))
}

/// The UTC calendar date of `occurred_ms` (unix milliseconds); `None` out of range.
fn utc_date(occurred_ms: i64) -> Option<Date> {
    OffsetDateTime::from_unix_timestamp_nanos(i128::from(occurred_ms) * 1_000_000)
        .ok()
        .map(OffsetDateTime::date)
}

const MONTHS: [(&str, Month); 12] = [
    ("january", Month::January),
    ("february", Month::February),
    ("march", Month::March),
    ("april", Month::April),
    ("may", Month::May),
    ("june", Month::June),
    ("july", Month::July),
    ("august", Month::August),
    ("september", Month::September),
    ("october", Month::October),
    ("november", Month::November),
    ("december", Month::December),
];

/// The month a word names, and whether it is abbreviated: a full name or its first three
/// letters ("Sept" too), any case, except "may" and "march" (and "mar"), which are months
/// only when capitalised.
fn month_of(word: &str) -> Option<(u8, bool)> {
    let lower = word.to_lowercase();
    let capitalised = word.chars().next().is_some_and(char::is_uppercase);
    let abbreviated = |name: &str| {
        (lower.len() == 3 && name.starts_with(&lower)) || (lower == "sept" && name == "september")
    };
    let (name, month) = MONTHS
        .iter()
        .find(|(name, _)| *name == lower || abbreviated(name))?;
    let ambiguous = matches!(*name, "may" | "march");
    (capitalised || !ambiguous).then_some((u8::from(*month), *name != lower))
}

/// A day of the month: 1–31, bare or with its ordinal suffix ("13", "13th", "1st").
fn day_of(word: &str) -> Option<u8> {
    let digits = word.trim_end_matches(|c: char| c.is_ascii_alphabetic());
    let suffix = &word[digits.len()..];
    if !matches!(
        suffix.to_lowercase().as_str(),
        "" | "st" | "nd" | "rd" | "th"
    ) || digits.len() > 2
    {
        return None;
    }
    digits.parse::<u8>().ok().filter(|d| (1..=31).contains(d))
}

/// A year: four digits from 1900 to 2199.
fn year_of(word: &str) -> Option<i32> {
    (word.len() == 4 && word.bytes().all(|b| b.is_ascii_digit()))
        .then(|| word.parse::<i32>().ok())
        .flatten()
        .filter(|y| (1900..2200).contains(y))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn date(year: Option<i32>, month: Option<u8>, day: Option<u8>) -> NamedDate {
        NamedDate { year, month, day }
    }

    #[test]
    fn full_dates_in_either_order_with_or_without_commas_and_ordinals() {
        let want = vec![date(Some(2023), Some(10), Some(13))];
        for q in [
            "What painting did Melanie show on October 13, 2023?",
            "What did she show on 13 October, 2023?",
            "shown on October 13th 2023",
            "on 13th Oct 2023",
        ] {
            assert_eq!(named_dates(q), want, "{q}");
        }
    }

    #[test]
    fn partial_dates_keep_what_the_query_says() {
        assert_eq!(
            named_dates("What did Maria donate in December 2023?"),
            vec![date(Some(2023), Some(12), None)]
        );
        assert_eq!(
            named_dates("When did Melanie go camping in June?"),
            vec![date(None, Some(6), None)]
        );
        assert_eq!(
            named_dates("How many times has she gone to the beach in 2023?"),
            vec![date(Some(2023), None, None)]
        );
        assert_eq!(
            named_dates("between July 4 and Sept 2022"),
            vec![
                date(None, Some(7), Some(4)),
                date(Some(2022), Some(9), None)
            ]
        );
    }

    #[test]
    fn words_that_only_look_like_dates_name_none() {
        assert!(named_dates("What may Caroline march for?").is_empty());
        assert!(named_dates("She ran 5 miles in 45 minutes, 12345 steps").is_empty());
        assert!(named_dates("").is_empty());
        assert!(named_dates("What did Jan tell Dec about it?").is_empty());
        assert_eq!(
            named_dates("What did she do in May?"),
            vec![date(None, Some(5), None)]
        );
    }

    #[test]
    fn an_event_matches_the_parts_a_date_names_in_utc() {
        // 2023-10-13T23:30:00Z
        let at = 1_697_239_800_000;
        assert!(date(Some(2023), Some(10), Some(13)).matches(at));
        assert!(date(None, Some(10), None).matches(at));
        assert!(date(Some(2023), None, None).matches(at));
        assert!(!date(Some(2023), Some(10), Some(14)).matches(at));
        assert!(!date(Some(2022), Some(10), None).matches(at));
        assert!(on_any(&named_dates("in 2021 or October"), at));
        assert!(!on_any(&named_dates("in 2021"), at));
        assert!(!on_any(&[], at));
    }
}
