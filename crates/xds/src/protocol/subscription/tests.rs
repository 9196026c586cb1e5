//! The `ShouldRespond` rule as a decision table (istio's `TestShouldRespond` cases, and
//! axon's reconnect and unchanged-set cases), and the invariants of one subscription.

use super::*;

static NAMES: std::sync::LazyLock<NameSets> = std::sync::LazyLock::new(NameSets::default);

const CDS: ResourceType = ResourceType::Cluster;
const EDS: ResourceType = ResourceType::Endpoint;
const LDS: ResourceType = ResourceType::Listener;

fn req(nonce: &str, names: &[&str]) -> XdsRequest {
    XdsRequest {
        response_nonce: nonce.to_string(),
        resource_names: names.iter().copied().collect(),
        ..Default::default()
    }
}

fn nack(nonce: &str, names: &[&str]) -> XdsRequest {
    XdsRequest {
        error_detail: Some("bad".into()),
        ..req(nonce, names)
    }
}

/// `req` with the `version_info` of a set of digest `digest`.
fn claiming(digest: u64, nonce: &str, names: &[&str]) -> XdsRequest {
    XdsRequest {
        version_info: sotw_version(digest),
        ..req(nonce, names)
    }
}

/// Sends a set of `digest` for `type_url` with `nonce` (not a push: always sent unless the
/// client named its version on reconnecting).
fn send(s: &mut SotwSubscriptions, type_url: ResourceType, digest: u64, nonce: &str) -> bool {
    s.answer(type_url, digest, 1, false, || nonce.to_string())
        .is_some()
}

/// One step of a stream's history before the request under test.
enum Step {
    Ask(ResourceType, &'static str, &'static [&'static str]),
    Send(ResourceType, &'static str),
}

use Step::{Ask, Send};

#[test]
fn should_respond_decision_table() {
    let cases: Vec<(&str, Vec<Step>, ResourceType, XdsRequest, Decision)> = vec![
        (
            "initial request",
            vec![],
            EDS,
            req("", &["a"]),
            Decision::Respond,
        ),
        (
            "a nonce of an earlier stream on a first request (a reconnect)",
            vec![],
            EDS,
            req("9-9", &["a"]),
            Decision::Respond,
        ),
        (
            "ACK",
            vec![Ask(EDS, "", &["a"]), Send(EDS, "n1")],
            EDS,
            req("n1", &["a"]),
            Decision::Ack,
        ),
        (
            "NACK",
            vec![Ask(EDS, "", &["a"]), Send(EDS, "n1")],
            EDS,
            nack("n1", &["a"]),
            Decision::Nack("bad".into()),
        ),
        (
            "expired nonce",
            vec![Ask(EDS, "", &["a"]), Send(EDS, "n1"), Send(EDS, "n2")],
            EDS,
            req("n1", &["a"]),
            Decision::Stale,
        ),
        (
            "a nonce never sent",
            vec![Ask(EDS, "", &["a"]), Send(EDS, "n1")],
            EDS,
            req("other", &["a"]),
            Decision::Stale,
        ),
        (
            "empty nonce on a known type: a restarted subscription",
            vec![Ask(EDS, "", &["a"]), Send(EDS, "n1")],
            EDS,
            req("", &["a"]),
            Decision::Respond,
        ),
        (
            "resources added",
            vec![Ask(EDS, "", &["a"]), Send(EDS, "n1")],
            EDS,
            req("n1", &["a", "b"]),
            Decision::Respond,
        ),
        (
            "resources removed",
            vec![Ask(EDS, "", &["a", "b"]), Send(EDS, "n1")],
            EDS,
            req("n1", &["a"]),
            Decision::Respond,
        ),
        (
            "the same names in another order",
            vec![Ask(EDS, "", &["a", "b"]), Send(EDS, "n1")],
            EDS,
            req("n1", &["b", "a"]),
            Decision::Ack,
        ),
        (
            "wildcard: an ACK naming nothing",
            vec![Ask(LDS, "", &[]), Send(LDS, "n1")],
            LDS,
            req("n1", &[]),
            Decision::Ack,
        ),
        (
            "wildcard: an ACK naming `*`",
            vec![Ask(LDS, "", &[]), Send(LDS, "n1")],
            LDS,
            req("n1", &["*"]),
            Decision::Ack,
        ),
        (
            "named CDS (a gRPC client): a name added",
            vec![Ask(CDS, "", &["a"]), Send(CDS, "n1")],
            CDS,
            req("n1", &["a", "b"]),
            Decision::Respond,
        ),
        (
            "AlwaysRespond: an EDS ACK after a CDS response",
            vec![
                Ask(EDS, "", &["a"]),
                Send(EDS, "n1"),
                Ask(CDS, "", &[]),
                Send(CDS, "c1"),
            ],
            EDS,
            req("n1", &["a"]),
            Decision::Respond,
        ),
        (
            "AlwaysRespond ends with the EDS response",
            vec![
                Ask(EDS, "", &["a"]),
                Ask(CDS, "", &[]),
                Send(CDS, "c1"),
                Send(EDS, "n2"),
            ],
            EDS,
            req("n2", &["a"]),
            Decision::Ack,
        ),
        (
            "AlwaysRespond: a NACK is still a NACK",
            vec![
                Ask(EDS, "", &["a"]),
                Send(EDS, "n1"),
                Ask(CDS, "", &[]),
                Send(CDS, "c1"),
            ],
            EDS,
            nack("n1", &["a"]),
            Decision::Nack("bad".into()),
        ),
        (
            "AlwaysRespond: a stale nonce is still stale",
            vec![
                Ask(EDS, "", &["a"]),
                Send(EDS, "n1"),
                Send(EDS, "n2"),
                Ask(CDS, "", &[]),
                Send(CDS, "c1"),
            ],
            EDS,
            req("n1", &["a"]),
            Decision::Stale,
        ),
        (
            "AlwaysRespond is for EDS only",
            vec![
                Ask(LDS, "", &[]),
                Send(LDS, "n1"),
                Ask(CDS, "", &[]),
                Send(CDS, "c1"),
            ],
            LDS,
            req("n1", &[]),
            Decision::Ack,
        ),
    ];
    for (name, history, type_url, request, want) in cases {
        let mut s = SotwSubscriptions::default();
        for (i, step) in history.iter().enumerate() {
            match step {
                Ask(t, nonce, names) => {
                    s.should_respond(*t, &req(nonce, names), &NAMES);
                }
                Send(t, nonce) => assert!(send(&mut s, *t, i as u64, nonce), "{name}: sent"),
            }
        }
        assert_eq!(s.should_respond(type_url, &request, &NAMES), want, "{name}");
    }
}

/// One row of [`answer_decision_table`]: an EDS subscription that was sent a set of digest
/// `before` (if any), and a CDS response just before (`after_cds`), gets `request`, then a
/// set of digest `digest`, on a push or not: is it `sent`?
struct AnswerCase {
    name: &'static str,
    before: Option<u64>,
    after_cds: bool,
    request: XdsRequest,
    digest: u64,
    push: bool,
    sent: bool,
}

fn case(name: &'static str, before: Option<u64>, request: XdsRequest, digest: u64) -> AnswerCase {
    AnswerCase {
        name,
        before,
        after_cds: false,
        request,
        digest,
        push: false,
        sent: true,
    }
}

#[test]
fn answer_decision_table() {
    let cases = [
        case("a first request", None, req("", &["a"]), 7),
        AnswerCase {
            sent: false,
            ..case(
                "a reconnect naming the version of the set",
                None,
                claiming(7, "", &["a"]),
                7,
            )
        },
        case(
            "a reconnect naming another version",
            None,
            claiming(6, "", &["a"]),
            7,
        ),
        AnswerCase {
            after_cds: true,
            ..case(
                "a reconnect naming the version, right after CDS (warming)",
                None,
                claiming(7, "", &["a"]),
                7,
            )
        },
        case(
            "a version with a nonce is not a claim",
            Some(6),
            claiming(7, "n0", &["a"]),
            7,
        ),
        AnswerCase {
            push: true,
            sent: false,
            ..case("a push of the set sent", Some(7), req("n0", &["a"]), 7)
        },
        AnswerCase {
            push: true,
            ..case("a push of another set", Some(6), req("n0", &["a"]), 7)
        },
        case(
            "a request for the set sent (new names, same set)",
            Some(7),
            req("n0", &["a", "b"]),
            7,
        ),
    ];
    for c in cases {
        let name = c.name;
        let mut s = SotwSubscriptions::default();
        if let Some(before) = c.before {
            s.should_respond(EDS, &req("", &["a"]), &NAMES);
            send(&mut s, EDS, before, "n0");
        }
        if c.after_cds {
            s.should_respond(CDS, &req("", &[]), &NAMES);
            send(&mut s, CDS, 1, "c0");
        }
        s.should_respond(EDS, &c.request, &NAMES);
        let sent = s.answer(EDS, c.digest, 2, c.push, || "n1".to_string());
        assert_eq!(sent.is_some(), c.sent, "{name}");
        let w = s.subscribed(EDS).unwrap();
        assert_eq!(w.digest_sent(), Some(c.digest), "{name}: the client has it");
        match sent {
            Some(sent) => {
                assert_eq!(sent.version, sotw_version(c.digest), "{name}");
                assert_eq!(w.nonce_sent(), Some("n1"), "{name}");
                assert!(!w.is_acked(), "{name}: awaits its ACK");
            }
            None if !c.push => {
                assert!(w.is_acked(), "{name}: in sync, nothing to ACK");
                let version = sotw_version(c.digest);
                assert_eq!(w.version_acked(), Some(version.as_str()), "{name}");
            }
            None => {}
        }
    }
}

#[test]
fn the_kept_digest_is_the_one_of_the_names() {
    let rds = ResourceType::Route;
    let mut s = SotwSubscriptions::default();
    s.should_respond(rds, &req("", &["80", "8080"]), &NAMES);
    let w = s.subscribed_mut(rds).unwrap();
    let first = w.names_digest().1;
    assert_eq!(first, crate::names_digest(w.names()));
    send(&mut s, rds, 1, "n1");
    s.should_respond(rds, &req("n1", &["80"]), &NAMES);
    let w = s.subscribed_mut(rds).unwrap();
    let expected = crate::names_digest(w.names());
    assert_ne!(expected, first);
    assert_eq!(w.names_digest().1, expected, "new names, new digest");
}

#[test]
fn first_request_then_ack_then_stale() {
    let mut s = SotwSubscriptions::default();
    assert_eq!(
        s.should_respond(EDS, &req("", &["a"]), &NAMES),
        Decision::Respond
    );
    send(&mut s, EDS, 1, "n1");
    assert_eq!(
        s.should_respond(EDS, &req("n1", &["a"]), &NAMES),
        Decision::Ack
    );
    assert!(s.subscribed(EDS).unwrap().is_acked());
    assert_eq!(
        s.should_respond(EDS, &req("old", &["a", "b"]), &NAMES),
        Decision::Stale
    );
    assert_eq!(
        s.subscribed(EDS).unwrap().names().len(),
        1,
        "a stale request changes nothing"
    );
    let mut other = SotwSubscriptions::default();
    other.should_respond(EDS, &req("", &["a"]), &NAMES);
    assert!(
        std::ptr::eq(
            s.subscribed(EDS).unwrap().names(),
            other.subscribed(EDS).unwrap().names()
        ),
        "streams subscribing the same names share one set"
    );
    assert_eq!(
        s.should_respond(EDS, &req("n1", &["a", "b"]), &NAMES),
        Decision::Respond
    );
}

#[test]
fn nack_is_recorded_and_not_answered() {
    let mut s = SotwSubscriptions::default();
    s.should_respond(CDS, &req("", &[]), &NAMES);
    send(&mut s, CDS, 1, "n1");
    let mut nack = req("n1", &[]);
    nack.error_detail = Some("bad cluster".into());
    assert_eq!(
        s.should_respond(CDS, &nack, &NAMES),
        Decision::Nack("bad cluster".into())
    );
    let w = s.subscribed(CDS).unwrap();
    assert_eq!(w.last_error(), Some("bad cluster"));
    assert!(!w.is_acked());
}

#[test]
fn a_named_cds_subscription_is_answered_when_names_change() {
    // gRPC clients ask CDS by name, adding names as routes reference them.
    let mut s = SotwSubscriptions::default();
    s.should_respond(CDS, &req("", &["a"]), &NAMES);
    assert!(!s.subscribed(CDS).unwrap().wildcard());
    send(&mut s, CDS, 1, "n1");
    assert_eq!(
        s.should_respond(CDS, &req("n1", &["a", "b"]), &NAMES),
        Decision::Respond
    );
}

#[test]
fn wildcard_types_ignore_names_on_ack() {
    let mut s = SotwSubscriptions::default();
    s.should_respond(LDS, &req("", &[]), &NAMES);
    let w = s.subscribed(LDS).unwrap();
    assert!(w.wildcard() && w.is_subscribed());
    send(&mut s, LDS, 1, "n1");
    assert_eq!(
        s.should_respond(LDS, &req("n1", &[]), &NAMES),
        Decision::Ack
    );
}

proptest::proptest! {
    /// Whatever was sent and whatever nonce comes back, only the last nonce sent is
    /// ever taken as an ACK.
    #[test]
    fn a_stale_nonce_is_never_taken_as_an_ack(
        sent in proptest::collection::vec("[a-z0-9]{1,4}", 1..6),
        reply in "[a-z0-9]{1,4}",
    ) {
        let mut s = SotwSubscriptions::default();
        s.should_respond(EDS, &req("", &["a"]), &NAMES);
        for (i, nonce) in sent.iter().enumerate() {
            send(&mut s, EDS, i as u64, nonce);
        }
        let last = sent.last().unwrap().clone();
        let decision = s.should_respond(EDS, &req(&reply, &["a"]), &NAMES);
        let w = s.subscribed(EDS).unwrap();
        if reply == last {
            proptest::prop_assert_eq!(decision, Decision::Ack);
            proptest::prop_assert!(w.is_acked());
        } else {
            proptest::prop_assert_eq!(decision, Decision::Stale);
            proptest::prop_assert!(!w.is_acked());
            proptest::prop_assert_eq!(w.nonce_acked(), None);
        }
    }
}
