//! The words of a recall query, read once per recall: which of the tenant's actors it names,
//! the text BM25 searches and the text its vector is embedded from.
//!
//! A name in a query ("What did Caroline paint?") says whose events matter, which the actor
//! signal answers (`rank::Signals::actor`); as a word it would also pull in every event that
//! merely mentions the name ("Hey Caroline!"), and it draws the query's embedding towards
//! the person instead of the topic. So a named actor's words are left out of the lexical
//! text and of the semantic text, and BM25 also leaves out function words ("what", "did",
//! "the"), whose matches say nothing about relevance.
//!
//! Invariants: pure (the caller passes the tenant's actors); an actor is named only when
//! every alphanumeric word of its id occurs in the query, compared case-insensitively; a
//! semantic text that would be left without a word is the query unchanged, so stripping never
//! leaves a query nothing to embed; the lexical text may be empty (a query of names and
//! function words alone), and BM25 then matches nothing while the actor signal still ranks.

/// Function words BM25 leaves out of a query: articles, auxiliaries, pronouns, prepositions,
/// conjunctions and question words. They occur in most events, so their matches carry
/// almost no evidence but still add to the scores of long, chatty events. Lower case.
const STOP_WORDS: &[&str] = &[
    "a", "about", "all", "am", "an", "and", "any", "are", "as", "at", "be", "been", "being", "but",
    "by", "can", "could", "did", "do", "does", "done", "for", "from", "had", "has", "have", "he",
    "her", "hers", "him", "his", "how", "i", "if", "in", "into", "is", "it", "its", "may", "me",
    "might", "my", "no", "not", "of", "on", "or", "our", "s", "she", "should", "so", "some", "t",
    "than", "that", "the", "their", "them", "then", "there", "these", "they", "this", "those",
    "to", "us", "was", "we", "were", "what", "when", "where", "which", "who", "whom", "why",
    "will", "with", "would", "you", "your",
];

/// Whether `word` (any case) is a function word BM25 leaves out.
pub fn is_stop_word(word: &str) -> bool {
    let lower = word.to_lowercase();
    STOP_WORDS.binary_search(&lower.as_str()).is_ok()
}

/// Alphanumeric words.
pub fn words(text: &str) -> impl Iterator<Item = &str> + '_ {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
}

/// The words of a query, lower-cased, for recognising actors it names.
pub struct ActorNames {
    words: Vec<String>,
}

impl ActorNames {
    /// The distinct words of `query`.
    pub fn new(query: &str) -> Self {
        let mut words: Vec<String> = words(query).map(str::to_lowercase).collect();
        words.sort_unstable();
        words.dedup();
        ActorNames { words }
    }

    /// The query's distinct words, lower-cased, sorted.
    pub fn query_words(&self) -> &[String] {
        &self.words
    }

    /// Whether every word of `actor_id` occurs in the query (case-insensitive, lower-cased
    /// as the query's words are: a final sigma too).
    pub fn names(&self, actor_id: &str) -> bool {
        let mut any = false;
        for w in words(actor_id) {
            if self.words.binary_search(&w.to_lowercase()).is_err() {
                return false;
            }
            any = true;
        }
        any
    }
}

/// What a recall reads from its query text, given the actors it names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueryWords {
    /// The words BM25 searches, space-separated: the query's words less function words and
    /// the named actors' words (empty when none is left: BM25 then matches nothing).
    pub lexical: String,
    /// The text to embed: the query less the whitespace-separated tokens made only of named
    /// actors' words (a trailing possessive "'s" and punctuation around it included); the
    /// query itself when nothing, or nothing but punctuation, would be left.
    pub semantic: String,
}

impl QueryWords {
    /// Reads `query`, `named` being the ids of the actors it names.
    pub fn new(query: &str, named: &[&str]) -> Self {
        let mut name_words: Vec<String> = named
            .iter()
            .flat_map(|a| words(a).map(str::to_lowercase))
            .collect();
        name_words.sort_unstable();
        name_words.dedup();
        let is_name = |w: &str| name_words.binary_search(&w.to_lowercase()).is_ok();
        let lexical: Vec<&str> = words(query)
            .filter(|w| !is_stop_word(w) && !is_name(w))
            .collect();
        let semantic: Vec<&str> = query
            .split_whitespace()
            .filter(|token| {
                let mut parts = words(token_core(token)).peekable();
                parts.peek().is_none() || !parts.all(is_name)
            })
            .collect();
        let semantic = if semantic.iter().any(|t| words(t).next().is_some()) {
            semantic.join(" ")
        } else {
            query.to_string()
        };
        QueryWords {
            lexical: lexical.join(" "),
            semantic,
        }
    }
}

/// A whitespace token without the punctuation around it and a trailing possessive
/// ("Caroline's?" → "Caroline").
fn token_core(token: &str) -> &str {
    let core = token.trim_matches(|c: char| !c.is_alphanumeric());
    ["'s", "’s", "'S", "’S"]
        .iter()
        .find_map(|p| core.strip_suffix(p))
        .unwrap_or(core)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stop_list_is_sorted_lower_case_and_unique() {
        assert!(STOP_WORDS.windows(2).all(|w| w[0] < w[1]));
        assert!(STOP_WORDS.iter().all(|w| *w == w.to_lowercase()));
        assert!(is_stop_word("What") && is_stop_word("the"));
        assert!(!is_stop_word("painting"));
    }

    #[test]
    fn an_actor_is_named_when_all_its_words_occur_in_the_query() {
        let q = ActorNames::new("What did Caroline tell user 42 about the trip?");
        assert!(q.names("Caroline"));
        assert!(q.names("caroline"));
        assert!(q.names("user-42"));
        assert!(!q.names("user-7"));
        assert!(!q.names("Melanie"));
        assert!(!q.names("--"), "an id without words names nobody");
        assert!(ActorNames::new("Was ΟΔΥΣΣΕΥΣ there?").names("Οδυσσευς"));
    }

    #[test]
    fn named_actors_and_function_words_leave_the_lexical_text() {
        let q = QueryWords::new("What did Caroline's sister paint in July?", &["Caroline"]);
        assert_eq!(q.lexical, "sister paint July");
        assert_eq!(q.semantic, "What did sister paint in July?");
        let none = QueryWords::new("What did Caroline paint?", &[]);
        assert_eq!(none.lexical, "Caroline paint");
        assert_eq!(none.semantic, "What did Caroline paint?");
    }

    #[test]
    fn a_query_of_names_alone_keeps_its_text() {
        let q = QueryWords::new("Caroline?", &["Caroline"]);
        assert_eq!(q.semantic, "Caroline?");
        assert_eq!(q.lexical, "");
        let multi = QueryWords::new("notes from user 42 and user-42's", &["user-42"]);
        assert_eq!(multi.semantic, "notes from and");
        assert_eq!(multi.lexical, "notes");
    }
}
