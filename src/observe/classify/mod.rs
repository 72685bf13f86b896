//! The observe classifier: lexical rules plus nearest-prototype similarity in embedding space
//! decide whether an interaction is routine chatter or an event, and which event type.
//!
//! Invariants:
//! - the rule layer ([`lexical`], [`cues`], [`decide`]) is pure and model-free;
//! - prototype sentences are this module's own writing, separate from the labelled eval set,
//!   embedded once per model ([`Prototypes::build`]) and compared by dot product (vectors are
//!   unit length, so that is the cosine);
//! - chatter phrases ("thanks", "no problem", "have a good day") are removed before cue
//!   matching, so politeness never hides an event and "no problem" is never an incident;
//! - an interaction is stored only when something event-like remains: a rule cue, or
//!   content words whose embedding is closer to an event prototype than to chatter; tool
//!   output skips the prototype comparison but still needs two content words or a cue, so a
//!   bare `ping` or `ack` from a tool is chatter.

use std::sync::LazyLock;

use regex::Regex;
use serde::Serialize;

use crate::embed::{EmbedError, Embedder};

/// The event types the observer can propose, in score order (the seed's six).
pub const EVENT_TYPES: [&str; 6] = [
    "user_preference_stated",
    "correction_received",
    "task_milestone",
    "human_approval",
    "tool_observed_event",
    "incident_or_failure",
];

const PREFERENCE: usize = 0;
const CORRECTION: usize = 1;
const MILESTONE: usize = 2;
const APPROVAL: usize = 3;
const TOOL: usize = 4;
const INCIDENT: usize = 5;

/// Who produced the interaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// The end user.
    User,
    /// The assistant.
    Assistant,
    /// A tool result.
    Tool,
    /// A system message.
    System,
}

impl Role {
    /// Every role.
    pub const ALL: [Role; 4] = [Role::User, Role::Assistant, Role::Tool, Role::System];

    /// The wire string.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Tool => "tool",
            Role::System => "system",
        }
    }
}

/// Why an interaction was not stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum IgnoreReason {
    /// Greetings, thanks, acknowledgements, small talk, filler.
    RoutineChatter,
    /// No words at all (punctuation, emoji, interjections).
    ContentFree,
    /// The text holds a credential (API key, token, password, private key): never stored.
    ContainsCredential,
}

impl IgnoreReason {
    /// The wire string.
    pub fn as_str(self) -> &'static str {
        match self {
            IgnoreReason::RoutineChatter => "routine_chatter",
            IgnoreReason::ContentFree => "content_free",
            IgnoreReason::ContainsCredential => "contains_credential",
        }
    }
}

/// Prototype sentences for chatter (never stored).
const CHATTER_PROTOTYPES: [&str; 36] = [
    "hello there, hope you are well",
    "good morning everyone",
    "hey, how's it going?",
    "hi, nice to meet you",
    "thank you so much for your help",
    "thanks a lot, much appreciated",
    "cheers, that's great",
    "okay, got it",
    "sounds good to me",
    "alright, understood",
    "perfect, thanks",
    "have a nice weekend",
    "bye for now, talk soon",
    "see you tomorrow",
    "how was your holiday?",
    "the weather is lovely today",
    "haha that's funny",
    "sorry, give me a second",
    "let me look into that for you",
    "one moment while I check",
    "is there anything else I can help you with?",
    "happy to help!",
    "you're welcome",
    "can I ask you something?",
    "I have a quick question",
    "could you help me with something?",
    "just checking in",
    "no worries at all",
    "I'm doing fine, and you?",
    "great to hear from you",
    "I need to run this past my boss first, I'll come back to you",
    "busy day today, phew",
    "such a long week, can't wait for the weekend",
    "pulling up your details now",
    "feel free to ask if anything else comes up",
    "I'll think it over and let you know",
];

/// Prototype sentences per event type, in [`EVENT_TYPES`] order.
const EVENT_PROTOTYPES: [[&str; 8]; 6] = [
    [
        "please send all future notifications by text message",
        "I would rather get a call than an email",
        "from now on use my work address for receipts",
        "I prefer morning appointments",
        "stop sending me the weekly newsletter",
        "please always book aisle seats for me",
        "switch my plan to annual billing going forward",
        "I like short summaries instead of long reports",
    ],
    [
        "actually the meeting is on thursday, not wednesday",
        "sorry, I meant the blue one, not the red one",
        "that's wrong, the amount should be 250 dollars",
        "correction: the customer id is different",
        "no, the server is in the eu region, not us",
        "you got my name wrong, it's spelled differently",
        "I made a typo earlier, the quantity is twelve",
        "the date you recorded is incorrect",
    ],
    [
        "the migration to the new database is complete",
        "we shipped version two to production today",
        "the onboarding of the new client is finished",
        "all invoices for march have been sent",
        "the contract was signed and returned",
        "phase one of the project is done",
        "I booked the flights and the hotel for the trip",
        "the refund has been processed",
    ],
    [
        "I approve the purchase order",
        "manager signed off on the budget increase",
        "you have my approval to deploy the release",
        "go ahead and merge the pull request",
        "the change request was approved by the board",
        "legal gave the green light for the contract",
        "the expense report is authorized",
        "yes, you may proceed with the refund",
    ],
    [
        "status: shipped, carrier reported delivery at noon",
        "the api returned 42 open tickets for this account",
        "webhook received: payment succeeded",
        "the calendar shows the slot was booked",
        "monitoring reports cpu at 35 percent",
        "query result: three matching customers",
        "the crm updated the lead stage to qualified",
        "build 512 finished with all tests passing",
    ],
    [
        "the website is down and customers cannot log in",
        "the payment failed with a card declined error",
        "the job crashed with an out of memory exception",
        "my package arrived damaged",
        "we had an outage in the eu cluster last night",
        "the app keeps timing out when I upload files",
        "I was charged twice for the same order",
        "the backup did not run and data was lost",
    ],
];

/// Words that carry no event content on their own: greetings, thanks, acknowledgements,
/// pleasantries and function words.
const CHATTER_WORDS: &[&str] = &[
    "hi",
    "hello",
    "hey",
    "hiya",
    "howdy",
    "yo",
    "morning",
    "afternoon",
    "evening",
    "night",
    "good",
    "thanks",
    "thank",
    "thx",
    "ty",
    "cheers",
    "appreciate",
    "appreciated",
    "much",
    "so",
    "very",
    "lot",
    "ok",
    "okay",
    "k",
    "kk",
    "sure",
    "great",
    "awesome",
    "perfect",
    "cool",
    "nice",
    "sounds",
    "got",
    "it",
    "understood",
    "noted",
    "yes",
    "yep",
    "yeah",
    "yup",
    "no",
    "nope",
    "alright",
    "right",
    "fine",
    "bye",
    "goodbye",
    "see",
    "you",
    "later",
    "soon",
    "take",
    "care",
    "have",
    "a",
    "an",
    "the",
    "day",
    "weekend",
    "lovely",
    "wonderful",
    "excellent",
    "brilliant",
    "fantastic",
    "gotcha",
    "will",
    "do",
    "problem",
    "problems",
    "worries",
    "welcome",
    "you're",
    "youre",
    "are",
    "how",
    "doing",
    "how's",
    "going",
    "what's",
    "up",
    "all",
    "well",
    "i'm",
    "im",
    "am",
    "i",
    "too",
    "and",
    "that",
    "this",
    "is",
    "that's",
    "be",
    "helpful",
    "help",
    "for",
    "your",
    "again",
    "just",
    "me",
    "to",
    "of",
    "me",
    "we",
    "us",
    "there",
    "everyone",
    "folks",
    "team",
    "guys",
    "all",
    "again",
    "really",
    "super",
    "indeed",
    "absolutely",
    "definitely",
    "of",
    "course",
    "wow",
    "lol",
    "haha",
    "hahaha",
    "oh",
    "ah",
    "sorry",
    "excuse",
    "pardon",
    "please",
    "pls",
    "same",
    "here",
    "glad",
    "happy",
    "hear",
    "meet",
    "talk",
    "chat",
    "speak",
    "tomorrow",
    "monday",
    "friday",
    "then",
    "now",
    "one",
    "sec",
    "second",
    "moment",
    "minute",
    "hold",
    "on",
    "wait",
    "let",
    "check",
    "makes",
    "sense",
    "fair",
    "enough",
    "true",
    "agreed",
    "exactly",
    "indeed",
    "my",
    "pleasure",
    "anytime",
    "hope",
    "hopefully",
    "with",
    "in",
    "at",
    "bit",
    "quick",
    "question",
    "was",
    "were",
    "can",
    "could",
    "would",
    "should",
    "there's",
    "anything",
    "else",
    "everything",
    "nothing",
    "nope",
    "not",
    "bad",
    "wonderful",
    "amazing",
    "love",
    "it's",
    "its",
    "ciao",
    "bonjour",
    "hola",
    "gracias",
    "merci",
    "ta",
    "thankyou",
    "thanx",
    "done",
    "welcome",
    "back",
];

/// Interjections that carry nothing at all.
const FILLER_WORDS: &[&str] = &[
    "hmm", "hm", "hmmm", "uh", "um", "umm", "erm", "er", "ah", "eh", "mm", "mhm", "uhh", "huh",
    "oh", "ooh", "meh", "lol", "ha", "haha", "k", "ugh", "argh", "yay", "woohoo", "phew",
];

/// Multi-word pleasantries removed before cue matching.
static CHATTER_PHRASES: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)\b(?:no problem(?:s)?(?: at all)?|not a problem|no worries|thank(?:s| you)(?: so much| very much| a lot)?(?: for (?:your|the) help)?|have a (?:good|nice|great|lovely) (?:day|evening|weekend|one)|how are you(?: doing)?|hope (?:you(?:'re| are) )?(?:well|doing well)|sounds good|good (?:morning|afternoon|evening)|no rush|all good|my pleasure|happy to help)\b",
    )
});

fn re(pattern: &str) -> Regex {
    // The patterns are constants checked by the unit tests; an invalid one is a bug.
    #[allow(clippy::expect_used)]
    Regex::new(pattern).expect("valid built-in pattern")
}

/// One rule: a pattern that, when it matches, adds its weight to an event type's score.
struct Cue {
    name: &'static str,
    event_type: usize,
    weight: f32,
    pattern: Regex,
}

/// Rule cues: (name, event type, weight, pattern). Specific cues weigh more than broad ones.
const CUE_SPEC: [(&str, usize, f32, &str); 18] = [
    (
        "preference_going_forward",
        PREFERENCE,
        0.25,
        r"(?i)\b(?:from now on|going forward|in (?:the )?future|moving forward|from here on|for future|next time|by default|anymore|any more)\b",
    ),
    (
        "preference_request",
        PREFERENCE,
        0.2,
        r"(?i)\b(?:please (?:switch|change|send|use|stop|start|always|never|don't|do not|only|keep|move|update my|set|make|remove|add|unsubscribe|email|text|call|book|contact|mail|reimburse|no|avoid|schedule)|switch (?:me|my|us|our|it|to|all)|i(?:'d| would)? (?:prefer|rather|like to|like my|like the|like it|want (?:my|to|all|the|it|them|emails|invoices|notifications|any|no|only))|i'd like (?:my|to|all|the|it|them)|i (?:don't|do not) want|my preferred|(?:don't|do not|never) (?:call|email|text|send|contact|book|schedule|share|use|put)|always (?:send|call|email|book|use|cc|copy|include|schedule|ship|put|deliver|order)|opt (?:me )?(?:out|in)|unsubscribe|prefers?\b|rather than|no more (?:emails|calls|texts|newsletters|paper)|(?:make|set)\b[^.?!]{0,40}\bdefault)",
    ),
    (
        "preference_like",
        PREFERENCE,
        0.15,
        r"(?i)\b(?:i (?:really )?(?:like|hate|dislike|can't stand) (?:it when|when|getting|receiving|my|the|to|having)|works (?:best|better) for me|suits me|is better for me|i(?:'m| am) (?:vegetarian|vegan|allergic|left-handed|a night owl|an early riser))\b",
    ),
    (
        "correction_marker",
        CORRECTION,
        0.3,
        r"(?i)(?:\bcorrection\b|(?:^|[.,;!]\s*)(?:actually|to clarify|wait|oops|scratch that|my mistake|my bad|hmm no|no wait)\b[,:]?\s+(?:i|it|the|that|we|my|our|its|it's|not|you|he|she|they|there|this|[a-z]+ (?:is|was|are|were|should)))",
    ),
    (
        "correction_phrase",
        CORRECTION,
        0.3,
        r"(?i)\b(?:i meant|i mean\b|meant to (?:say|write|type)|i said\b|that(?:'s| is| was) (?:wrong|incorrect|not (?:right|correct|what i)|a mistake|a typo)|is (?:wrong|incorrect)|was (?:wrong|incorrect)|you (?:got|have|recorded|wrote|put|misspelled|mixed)\b[^.?!]{0,30}\b(?:wrong|as|up)\b|should (?:be|have been|read|say)|correct (?:one|amount|date|address|spelling|number|name|version) is|let me correct|i made a (?:mistake|typo|error)|typo|misspell(?:ed|t)?|wrong (?:date|address|name|amount|number|email|time|account|size|version|region|person|one)|i gave you the wrong|(?:it|this|that)'s (?:actually|really) )",
    ),
    (
        "correction_contrast",
        CORRECTION,
        0.25,
        r"(?i)(?:,\s*not\s+(?:the\s+|a\s+|an\s+|in\s+|to\s+|on\s+)?[\w-]+|\b(?:it's|it is|that's|this is) not\b[^.?!]{1,40}\b(?:it's|it is|but)\b)",
    ),
    (
        "milestone_done",
        MILESTONE,
        0.15,
        r"(?i)\b(?:is|are|has been|have been|was|were|got|just|finally|successfully|now|been|all)\s+(?:\w+\s+)?(?:completed?|finished|done|deployed|released|shipped|launched|merged|closed|resolved|migrated|published|delivered|submitted|signed|onboarded|rolled out|live|booked|confirmed|scheduled|processed|paid|sent|filed|reconciled|renewed|upgraded|installed|configured|enrolled|hired|issued|refunded|activated|placed|verified|opened|run)\b",
    ),
    (
        "milestone_verb",
        MILESTONE,
        0.2,
        r"(?i)\b(?:i|we|i've|we've|they|she|he|team|you)\s+(?:just |have |has |finally |successfully )?(?:completed|finished|deployed|released|shipped|launched|merged|closed|resolved|migrated|published|delivered|submitted|signed|onboarded|rolled out|booked|filed|reconciled|renewed|upgraded|installed|configured|enrolled|hired|issued|passed|hit|reached|wrapped up|went live|cut over|sent out|paid|placed|moved|cancell?ed|rescheduled|transferred|exported|imported|opened)\b|\b(?:milestone|went live|go-live|goes live|is live|ga release|sprint \d+ (?:closed|done|complete)|phase \w+ (?:complete|done|finished))\b",
    ),
    (
        "milestone_when",
        MILESTONE,
        0.15,
        r"(?i)\b(?:opened|launched|went live|kicked off|completed|finished|shipped|signed|closed|started|delivered)\s+(?:today|yesterday|this (?:morning|week|afternoon)|last (?:night|week)|on time)\b",
    ),
    (
        "approval",
        APPROVAL,
        0.3,
        r"(?i)\b(?:approved?|approval|signs? off|signed off|sign-off|green ?light|greenlit|lgtm|authori[sz]ed?|authori[sz]ation|go ahead|go-ahead|ok(?:ay)? to (?:proceed|merge|deploy|ship|release|pay|send|book|publish|launch)|permission (?:granted|to)|you (?:may|can) (?:proceed|go ahead)|cleared (?:it|the|for)|ship it|(?:i'm|i am) (?:happy|fine|ok|okay) (?:for you to|with (?:you|that|it|the|this)))\b",
    ),
    (
        "incident_words",
        INCIDENT,
        0.25,
        r"(?i)\b(?:errors?|fail(?:ed|ure|ures|ing|s)?|outage|crash(?:ed|es|ing)?|time[sd]? ?out|timing out|exception|broken|not working|doesn't work|does not work|stopped working|won't (?:load|open|start|work)|can't (?:log ?in|access|connect|sign in|open|load)|cannot (?:log ?in|access|connect|sign in|open|load)|bug|incident|degraded|latency (?:spike|above|over)|rolled back|rollback|declined|bounced|damaged|double[- ]charged|charged twice|overcharged|never (?:arrived|got|received|came)|did not (?:arrive|get|receive)|didn't (?:arrive|get|receive|run)|haven't received|missing|leak(?:ed)?|breach|disk full|out of memory|oom|sev ?\d|5\d\d (?:error|response)|stuck|corrupt(?:ed)?|lost|unavailable|refused|rejected|panic(?:ked)?|segfault|deadlock|broke|wrong item|delayed|late delivery|overdue|unreachable|alert fired|paged|dropping|no record of|without (?:my|our) (?:consent|permission|knowledge)|unauthori[sz]ed|hacked|compromised|fraud(?:ulent)?|missed (?:my|the|our|a))\b",
    ),
    (
        "incident_cancelled",
        INCIDENT,
        0.2,
        r"(?i)\b(?:flight|train|bus|order|appointment|booking|reservation|meeting|shipment|class|delivery) (?:was|got|has been|is) (?:cancell?ed|delayed|lost)\b",
    ),
    (
        "incident_wrong",
        INCIDENT,
        0.25,
        r"(?i)\b(?:ran|went out|was sent|were sent|was shipped|was charged|got charged|was processed|were processed|was delivered|got delivered|was applied|were paid|was paid) with (?:the |a )?wrong\b|\bwrong item was\b",
    ),
    (
        "tool_output",
        TOOL,
        0.2,
        r"(?i)(?:^\s*[\[{]|\b(?:according to (?:the )?[\w ]{2,20}|(?:dashboard|crm|system|portal|tracker|tracking|monitoring|logs?|api|report|calendar|erp|database|query|inventory|sensor) (?:shows|showed|says|reports|reported|returned|lists|indicates))\b)",
    ),
    (
        "milestone_passive",
        MILESTONE,
        0.15,
        r"(?i)\b(?:has|have) (?:now )?(?:been )?(?:completed|finished|deployed|shipped|launched|merged|closed|resolved|migrated|delivered|submitted|signed|filed|paid|processed|renewed|hired|onboarded|placed|run)\b",
    ),
    (
        "approval_decision",
        APPROVAL,
        0.2,
        r"(?i)\b(?:yes,? (?:you can|please) (?:go ahead|proceed|book|send|publish|cancel|merge|deploy)|(?:finance|legal|security|the board|the cab|manager|the dean|hr|compliance)\b[^.?!]{0,20}\b(?:approved|signed off|cleared|agreed))\b",
    ),
    (
        "correction_update",
        CORRECTION,
        0.2,
        r"(?i)\b(?:update|fix) (?:to|on) (?:my|the) (?:earlier|previous|last) (?:message|answer|note)\b",
    ),
    (
        "preference_identity",
        PREFERENCE,
        0.2,
        r"(?i)\b(?:call me|address me as|my pronouns are|my name is pronounced)\b",
    ),
];

static CUES: LazyLock<Vec<Cue>> = LazyLock::new(|| {
    CUE_SPEC
        .iter()
        .map(|&(name, event_type, weight, p)| Cue {
            name,
            event_type,
            weight,
            pattern: re(p),
        })
        .collect()
});

/// Phrases that mention approval without granting it ("for your approval").
static NOT_APPROVAL: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)\b(?:for|awaiting|pending|needs?|need|requires?|request(?:ing|ed)?|waiting for|submit(?:ted)? for)(?: your| my| their| manager| the)? approvals?(?: queue)?\b",
    )
});

/// What the rule layer saw in a text.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Lexical {
    /// No words at all.
    pub content_free: bool,
    /// Words left after removing chatter and function words.
    pub content_words: usize,
    /// Names of the rule cues that matched (after removing chatter phrases).
    pub cues: Vec<&'static str>,
    /// Summed cue weights per event type, in [`EVENT_TYPES`] order.
    #[serde(skip)]
    pub votes: [f32; 6],
    /// Whether the text is a question only.
    pub question: bool,
}

fn words(text: &str) -> Vec<String> {
    text.to_lowercase()
        .split(|c: char| !(c.is_alphanumeric() || c == '\''))
        .map(|w| w.trim_matches('\'').to_string())
        .filter(|w| !w.is_empty())
        .collect()
}

/// The pure rule layer over `text`.
pub fn lexical(text: &str) -> Lexical {
    let ws = words(text);
    let content_free = ws.iter().all(|w| FILLER_WORDS.contains(&w.as_str()));
    let content_words = ws
        .iter()
        .filter(|w| !CHATTER_WORDS.contains(&w.as_str()) && !FILLER_WORDS.contains(&w.as_str()))
        .count();
    let (cues, votes) = cues(text);
    let trimmed = text.trim_end();
    Lexical {
        content_free,
        content_words,
        cues,
        votes,
        question: trimmed.ends_with('?') && !trimmed[..trimmed.len() - 1].contains(['.', '!']),
    }
}

/// Names and per-type votes of the rule cues matching `text` once chatter phrases are removed.
pub fn cues(text: &str) -> (Vec<&'static str>, [f32; 6]) {
    let cleaned = CHATTER_PHRASES.replace_all(text, " ");
    let cleaned = NOT_APPROVAL.replace_all(&cleaned, " ");
    let mut names = Vec::new();
    let mut votes = [0f32; 6];
    for cue in CUES.iter() {
        if cue.pattern.is_match(&cleaned) {
            names.push(cue.name);
            votes[cue.event_type] += cue.weight;
        }
    }
    (names, votes)
}

/// Cosine similarity of one text to each prototype class.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Similarities {
    /// Best similarity to a chatter prototype.
    pub chatter: f32,
    /// Best similarity to each event type's prototypes, in [`EVENT_TYPES`] order.
    pub types: [f32; 6],
}

impl Similarities {
    /// The best event-type similarity.
    pub fn best_event(&self) -> f32 {
        self.types.iter().copied().fold(f32::MIN, f32::max)
    }
}

/// Prototype vectors for one embedding model.
pub struct Prototypes {
    model_id: String,
    chatter: Vec<Vec<f32>>,
    types: Vec<Vec<Vec<f32>>>,
}

impl Prototypes {
    /// Embeds every prototype sentence once. Blocking CPU work.
    pub fn build(embedder: &dyn Embedder) -> Result<Self, EmbedError> {
        let chatter = embedder.embed(&CHATTER_PROTOTYPES)?;
        let types = EVENT_PROTOTYPES
            .iter()
            .map(|group| embedder.embed(group))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Prototypes {
            model_id: embedder.model_id().to_string(),
            chatter,
            types,
        })
    }

    /// The model the prototypes were embedded with.
    pub fn model_id(&self) -> &str {
        &self.model_id
    }

    /// Best similarity of `v` to each class.
    pub fn similarities(&self, v: &[f32]) -> Similarities {
        let mut types = [0.0f32; 6];
        for (slot, group) in types.iter_mut().zip(&self.types) {
            *slot = best(v, group);
        }
        Similarities {
            chatter: best(v, &self.chatter),
            types,
        }
    }
}

fn best(v: &[f32], group: &[Vec<f32>]) -> f32 {
    group
        .iter()
        .map(|p| p.iter().zip(v).map(|(a, b)| a * b).sum::<f32>())
        .fold(f32::MIN, f32::max)
}

/// Tuning knobs of [`decide`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Thresholds {
    /// Without a cue, store only when the best event similarity beats chatter by this much.
    pub margin: f32,
    /// Multiplier of the summed cue weights in the type score.
    pub cue_weight: f32,
    /// Bonus for `tool_observed_event` when the role is `tool`.
    pub tool_role_bonus: f32,
}

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds {
            margin: 0.0,
            cue_weight: 1.0,
            tool_role_bonus: 0.25,
        }
    }
}

/// The classifier's verdict on one interaction.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Verdict {
    /// `None` when the interaction should be stored.
    pub ignore: Option<IgnoreReason>,
    /// The best event type (also reported for ignored turns).
    pub event_type: &'static str,
    /// Combined score per event type and for chatter.
    pub scores: Vec<(&'static str, f32)>,
    /// Top score minus the runner-up among event types.
    pub type_margin: f32,
}

/// Decides store/ignore and the event type from the rule layer and the similarities.
pub fn decide(lex: &Lexical, sims: &Similarities, role: Role, t: &Thresholds) -> Verdict {
    let mut combined = sims.types;
    for (i, slot) in combined.iter_mut().enumerate() {
        *slot += t.cue_weight * lex.votes[i];
    }
    if role == Role::Tool {
        combined[TOOL] += t.tool_role_bonus;
        if lex.votes[INCIDENT] > 0.0 {
            combined[INCIDENT] += t.tool_role_bonus;
        }
    }
    let (top, runner_up) = top_two(&combined);
    let mut scores: Vec<(&'static str, f32)> = EVENT_TYPES.iter().copied().zip(combined).collect();
    scores.push(("chatter", sims.chatter));
    Verdict {
        ignore: ignore_reason(lex, sims, role, t),
        event_type: EVENT_TYPES[top],
        scores,
        type_margin: combined[top] - combined[runner_up],
    }
}

fn top_two(scores: &[f32; 6]) -> (usize, usize) {
    let mut order: Vec<usize> = (0..scores.len()).collect();
    order.sort_by(|&a, &b| scores[b].total_cmp(&scores[a]));
    (order[0], order[1])
}

fn ignore_reason(
    lex: &Lexical,
    sims: &Similarities,
    role: Role,
    t: &Thresholds,
) -> Option<IgnoreReason> {
    if lex.content_free {
        return Some(IgnoreReason::ContentFree);
    }
    if lex.content_words == 0 {
        return Some(IgnoreReason::RoutineChatter);
    }
    if !lex.cues.is_empty() {
        return None;
    }
    if role == Role::Tool {
        // Tool output skips the similarity test (results are rarely phrased like the event
        // prototypes) but not the content test: a bare `ping`, `ack` or `200` observes
        // nothing.
        return (lex.content_words < 2).then_some(IgnoreReason::RoutineChatter);
    }
    if role == Role::System || lex.content_words < 2 {
        return Some(IgnoreReason::RoutineChatter);
    }
    if lex.question || sims.chatter >= sims.best_event() + t.margin {
        return Some(IgnoreReason::RoutineChatter);
    }
    None
}

#[cfg(test)]
mod tests;
