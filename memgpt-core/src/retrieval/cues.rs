//! What a query says besides its words: which participant it is about, and when.

use chrono::{DateTime, Datelike, Utc};

use super::analyzer::tokenize;

const MONTHS: [&str; 12] = [
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
];

/// The speaker and date cues of a query.
///
/// * **Speaker**: a query naming exactly one participant of the conversation ("What did
///   Caroline research?") is about what that participant said; their messages get a small boost.
/// * **The user**: a query in the first person singular ("What deadline did I set?", "my Redis
///   setup") is the user asking about themselves, as when the agent passes on the user's own
///   question; the user's messages get a boost. A request form alone ("tell me", "remind me")
///   is not a cue: only *I*, *my*, *mine* and *myself* are.
/// * **Date**: a query naming months and/or years ("camping in June", "on 8 May, 2023") is about
///   that time; messages written then, or in the month after (when events get told), get a
///   boost. "May" counts as a month only next to a number or after "in"/"of".
///
/// ```
/// use chrono::{TimeZone, Utc};
/// use memgpt_core::retrieval::QueryCues;
///
/// let cues = QueryCues::parse("What did Caroline paint in June 2023?");
/// assert_eq!(cues.named_participant(["Caroline", "Melanie"]), Some("Caroline".to_owned()));
/// assert!(cues.fits_date(Utc.with_ymd_and_hms(2023, 7, 2, 12, 0, 0).unwrap()));
/// assert!(!cues.fits_date(Utc.with_ymd_and_hms(2023, 8, 2, 12, 0, 0).unwrap()));
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct QueryCues {
    words: Vec<String>,
    months: Vec<u32>,
    years: Vec<i32>,
}

impl QueryCues {
    /// Reads the cues of a query.
    pub fn parse(query: &str) -> Self {
        let words = tokenize(query);
        let is_number =
            |w: Option<&String>| w.is_some_and(|w| w.chars().all(|c| c.is_ascii_digit()));
        let mut months = Vec::new();
        let mut years = Vec::new();
        for (i, w) in words.iter().enumerate() {
            if let Some(m) = MONTHS.iter().position(|m| m == w) {
                let may_ok = *w != "may"
                    || is_number(words.get(i + 1))
                    || i.checked_sub(1).is_some_and(|p| {
                        is_number(words.get(p)) || matches!(words[p].as_str(), "in" | "of")
                    });
                if may_ok {
                    months.push(m as u32 + 1);
                }
            } else if w.len() == 4
                && let Ok(year) = w.parse::<i32>()
                && (1900..2100).contains(&year)
            {
                years.push(year);
            }
        }
        months.sort_unstable();
        months.dedup();
        years.sort_unstable();
        years.dedup();
        Self {
            words,
            months,
            years,
        }
    }

    /// Whether the query speaks in the first person singular (*I*, *my*, *mine*, *myself*).
    ///
    /// ```
    /// use memgpt_core::retrieval::QueryCues;
    ///
    /// assert!(QueryCues::parse("What deadline did I set?").speaks_as_user());
    /// assert!(QueryCues::parse("how is my Redis set up").speaks_as_user());
    /// assert!(!QueryCues::parse("Can you remind me what Caroline said?").speaks_as_user());
    /// ```
    pub fn speaks_as_user(&self) -> bool {
        self.words
            .iter()
            .any(|w| matches!(w.as_str(), "i" | "my" | "mine" | "myself"))
    }

    /// The months (1-12) the query names.
    pub fn months(&self) -> &[u32] {
        &self.months
    }

    /// The years the query names.
    pub fn years(&self) -> &[i32] {
        &self.years
    }

    /// Whether the query names a month or a year.
    pub fn is_dated(&self) -> bool {
        !self.months.is_empty() || !self.years.is_empty()
    }

    /// Whether a message written at `t` fits the query's months and years (a month's successor
    /// fits too). `false` when the query names no date.
    pub fn fits_date(&self, t: DateTime<Utc>) -> bool {
        if !self.is_dated() {
            return false;
        }
        let month_ok = self.months.is_empty()
            || self
                .months
                .iter()
                .any(|&m| t.month() == m || t.month() == m % 12 + 1);
        let year_ok = self.years.is_empty() || self.years.contains(&t.year());
        month_ok && year_ok
    }

    /// Whether the query names `participant` (every word of the name appears in the query).
    pub fn names(&self, participant: &str) -> bool {
        let name = tokenize(participant);
        !name.is_empty() && name.iter().all(|w| self.words.contains(w))
    }

    /// The one participant the query names, if it names exactly one of them.
    pub fn named_participant<'a>(
        &self,
        participants: impl IntoIterator<Item = &'a str>,
    ) -> Option<String> {
        let mut named = participants.into_iter().filter(|p| self.names(p));
        let first = named.next()?;
        let first = first.to_owned();
        match named.find(|p| !p.eq_ignore_ascii_case(&first)) {
            Some(_) => None,
            None => Some(first),
        }
    }
}

#[cfg(test)]
mod tests {
    use chrono::TimeZone;

    use super::*;

    #[test]
    fn months_and_years() {
        let c = QueryCues::parse("When did Mel go camping in June?");
        assert_eq!((c.months(), c.years()), (&[6][..], &[][..]));
        let c = QueryCues::parse("What did she paint on October 13, 2023?");
        assert_eq!((c.months(), c.years()), (&[10][..], &[2023][..]));
        let c = QueryCues::parse("What did Jon find on 1 February, 2023?");
        assert_eq!((c.months(), c.years()), (&[2][..], &[2023][..]));
        assert!(!QueryCues::parse("May I ask what you may like?").is_dated());
        assert_eq!(QueryCues::parse("What happened in May?").months(), [5]);
        assert!(!QueryCues::parse("How many in 12345 or 1234?").is_dated());
    }

    #[test]
    fn dates_fit_their_month_and_the_next() {
        let at = |y, m| Utc.with_ymd_and_hms(y, m, 2, 13, 0, 0).unwrap();
        let june = QueryCues::parse("camping in June");
        assert!(june.fits_date(at(2023, 6)) && june.fits_date(at(2023, 7)));
        assert!(!june.fits_date(at(2023, 8)));
        assert!(!QueryCues::parse("June 2022").fits_date(at(2023, 6)));
        assert!(QueryCues::parse("in December").fits_date(at(2024, 1)));
        assert!(!QueryCues::parse("no date").fits_date(at(2024, 1)));
    }

    #[test]
    fn one_named_participant() {
        let c = QueryCues::parse("What did Bob say?");
        assert_eq!(c.named_participant(["Ann", "Bob"]), Some("Bob".into()));
        let c = QueryCues::parse("What did Bob tell Ann?");
        assert_eq!(c.named_participant(["Ann", "Bob"]), None);
        let c = QueryCues::parse("Did Mary Ann come?");
        assert_eq!(
            c.named_participant(["Mary Ann", "Ann Lee"]),
            Some("Mary Ann".into())
        );
        let c = QueryCues::parse("what did bob say");
        assert_eq!(c.named_participant(["bob", "Bob"]), Some("bob".into()));
    }
}
