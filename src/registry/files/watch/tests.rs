//! The fault rules of [`WatchState`], with the time passed in.

use std::time::SystemTime;

use super::*;

const VS: &str = "apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {name: a, namespace: ns}\nspec:\n  hosts: [a]\n  http: [{route: [{destination: {host: a}}]}]\n";
const VS2: &str = "apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {name: a, namespace: ns}\nspec:\n  hosts: [a]\n  http: [{route: [{destination: {host: b}}]}]\n";
const SETTLE: Duration = Duration::from_secs(1);

fn state() -> WatchState {
    WatchState::new("default", WatchRules::default())
}

fn read(text: &str, at: u64) -> FileRead {
    FileRead {
        content: Content::Text(text.to_string()),
        stamp: Some((SystemTime::UNIX_EPOCH, at)),
    }
}

fn gone() -> FileRead {
    FileRead {
        content: Content::Gone,
        stamp: None,
    }
}

fn unreadable(why: &str) -> FileRead {
    FileRead {
        content: Content::Unreadable(why.to_string()),
        stamp: Some((SystemTime::UNIX_EPOCH, 9)),
    }
}

/// A state that served VS from /d/a.yaml at `t0`.
fn serving(t0: Instant) -> WatchState {
    let mut w = state();
    w.apply(Path::new("/d/a.yaml"), read(VS, 1), t0);
    assert!(w.commit(t0).update.expect("initial").initial);
    w
}

#[test]
fn a_read_failure_is_never_a_deletion() {
    let t0 = Instant::now();
    let mut w = serving(t0);
    let path = Path::new("/d/a.yaml");
    let denied = unreadable("cannot read: Permission denied (os error 13)");
    assert!(matches!(
        w.apply(path, denied, t0),
        Applied::Kept {
            read_error: true,
            ..
        }
    ));
    assert!(
        w.commit(t0).update.is_none(),
        "the VirtualService is still served"
    );
    let configz = w.configz("files", Path::new("/d"));
    assert!(
        configz["errors"][0]
            .as_str()
            .unwrap()
            .contains("Permission denied"),
        "{configz}"
    );
    assert_eq!(configz["configs"].as_array().unwrap().len(), 1);
    // Readable again, the same text: nothing to push, and the error is gone.
    assert!(matches!(
        w.apply(path, read(VS, 3), t0),
        Applied::Parsed { .. }
    ));
    assert!(w.commit(t0).update.is_none());
    assert!(
        w.configz("files", Path::new("/d"))["errors"]
            .as_array()
            .unwrap()
            .is_empty()
    );
}

#[test]
fn a_file_gone_is_dropped_only_once_it_stays_gone_for_the_settle() {
    let t0 = Instant::now();
    let mut w = serving(t0);
    let path = Path::new("/d/a.yaml");
    assert!(matches!(w.apply(path, gone(), t0), Applied::Held { .. }));
    assert!(w.commit(t0).update.is_none());
    assert_eq!(w.next_deadline(), Some(t0 + SETTLE));
    assert_eq!(w.held_paths(), [path]);
    // Still gone at the deadline: dropped.
    let t1 = t0 + SETTLE;
    assert!(matches!(w.apply(path, gone(), t1), Applied::Parsed { .. }));
    assert_eq!(w.commit(t1).update.expect("deleted").changed.len(), 1);
    assert_eq!(w.next_deadline(), None);
}

#[test]
fn truncate_then_write_never_pushes_the_empty_file() {
    let t0 = Instant::now();
    let mut w = serving(t0);
    let path = Path::new("/d/a.yaml");
    assert!(matches!(
        w.apply(path, read("", 2), t0),
        Applied::Held { .. }
    ));
    assert!(w.commit(t0).update.is_none());
    // 0.3 s later the new text is there: only it is pushed.
    let t1 = t0 + Duration::from_millis(300);
    assert!(matches!(
        w.apply(path, read(VS2, 3), t1),
        Applied::Parsed { .. }
    ));
    let update = w.commit(t1).update.expect("the new text");
    assert_eq!(update.changed.len(), 1);
    assert_eq!(w.next_deadline(), None, "nothing held");
    // Emptied, then written again with the same text: nothing at all.
    w.apply(path, read("", 4), t1);
    w.apply(path, read(VS2, 5), t1 + SETTLE / 2);
    assert!(w.commit(t1 + SETTLE).update.is_none());
}

#[test]
fn an_emptied_file_that_changes_while_held_starts_its_settle_again() {
    let t0 = Instant::now();
    let mut w = serving(t0);
    let path = Path::new("/d/a.yaml");
    w.apply(path, read("", 2), t0);
    let t1 = t0 + Duration::from_millis(600);
    assert!(matches!(w.apply(path, gone(), t1), Applied::Held { until } if until == t1 + SETTLE));
    assert!(matches!(
        w.apply(path, gone(), t0 + SETTLE),
        Applied::Held { .. }
    ));
    assert!(matches!(
        w.apply(path, gone(), t1 + SETTLE),
        Applied::Parsed { .. }
    ));
}

#[test]
fn nothing_is_dropped_while_the_directory_is_missing() {
    let t0 = Instant::now();
    let mut w = serving(t0);
    let path = Path::new("/d/a.yaml");
    // `rm -rf`: the file goes, then the directory.
    w.apply(path, gone(), t0);
    assert!(w.dir_missing("the directory /d is gone".into()));
    assert!(
        !w.dir_missing("the directory /d is gone".into()),
        "not news"
    );
    let late = t0 + 10 * SETTLE;
    assert!(matches!(w.apply(path, gone(), late), Applied::Held { .. }));
    assert!(w.commit(late).update.is_none());
    // Back, with the file: held afresh from then, and found again unchanged.
    w.dir_back(late);
    assert_eq!(w.next_deadline(), Some(late + SETTLE));
    assert!(matches!(
        w.apply(path, read(VS, 1), late),
        Applied::Unchanged
    ));
    assert!(w.commit(late).update.is_none());
    assert_eq!(w.next_deadline(), None);
}

#[test]
fn files_under_a_subdirectory_that_cannot_be_listed_are_not_gone() {
    let t0 = Instant::now();
    let mut w = state();
    let (a, b) = (PathBuf::from("/d/a.yaml"), PathBuf::from("/d/sub/b.yaml"));
    w.apply(&a, read(VS, 1), t0);
    w.apply(&b, read(VS2, 1), t0);
    w.commit(t0);
    let listing = Listing {
        files: vec![(a.clone(), Some((SystemTime::UNIX_EPOCH, 1)))],
        unreadable_dirs: vec![("/d/sub".into(), "Permission denied (os error 13)".into())],
    };
    assert!(w.to_read(Vec::new(), Some(&listing)).is_empty());
    let configz = w.configz("files", Path::new("/d"));
    assert!(
        configz["errors"]
            .to_string()
            .contains("/d/sub: cannot list"),
        "{configz}"
    );
    // Listed again: the problem is gone, and b is still not read (its stamp did not move).
    let listing = Listing {
        files: vec![
            (a.clone(), Some((SystemTime::UNIX_EPOCH, 1))),
            (b.clone(), Some((SystemTime::UNIX_EPOCH, 1))),
        ],
        unreadable_dirs: Vec::new(),
    };
    assert!(w.to_read(Vec::new(), Some(&listing)).is_empty());
    assert!(
        w.configz("files", Path::new("/d"))["errors"]
            .as_array()
            .unwrap()
            .is_empty()
    );
}

#[test]
fn the_first_update_waits_for_a_clean_read() {
    let t0 = Instant::now();
    let mut w = state();
    let (a, b) = (PathBuf::from("/d/a.yaml"), PathBuf::from("/d/b.yaml"));
    w.apply(&a, read(VS, 1), t0);
    w.apply(
        &b,
        unreadable("cannot read: Permission denied (os error 13)"),
        t0,
    );
    assert!(w.commit(t0).update.is_none());
    let why = w.waiting(t0).expect("waiting");
    assert!(
        why.contains("1 unreadable: /d/b.yaml: cannot read: Permission denied"),
        "{why}"
    );
    // A file that is refused (not an I/O error) does not hold the start back.
    let refused = FileRead {
        content: Content::Rejected("invalid UTF-8 at line 1 (byte 0)".into()),
        stamp: None,
    };
    w.apply(&b, refused, t0);
    assert_eq!(w.waiting(t0), None);
    assert!(w.commit(t0).update.expect("initial").initial);

    let mut missing = state();
    missing.dir_missing("no directory /d".into());
    assert!(missing.commit(t0).update.is_none());
    assert_eq!(missing.waiting(t0).as_deref(), Some("no directory /d"));
}

#[test]
fn an_empty_directory_is_served_once_it_stays_empty_for_the_settle() {
    let t0 = Instant::now();
    let mut w = state();
    assert!(w.commit(t0).update.is_none());
    assert!(w.waiting(t0).unwrap().contains("file_settle"));
    assert_eq!(w.next_deadline(), Some(t0 + SETTLE));
    let first = w.commit(t0 + SETTLE).update.expect("the initial update");
    assert!(first.initial && first.configs.is_empty());
    assert!(w.commit(t0 + SETTLE).update.is_none(), "nothing changed");
    let path = Path::new("/d/a.yaml");
    assert!(matches!(
        w.apply(path, read(VS, 1), t0),
        Applied::Parsed { .. }
    ));
    let update = w
        .commit(t0 + SETTLE)
        .update
        .expect("a VirtualService appeared");
    assert!(!update.initial && update.changed.len() == 1 && !update.endpoints_only);
    assert!(
        matches!(w.apply(path, read(VS, 2), t0), Applied::Unchanged),
        "the same text"
    );
}

#[test]
fn files_past_max_files_are_refused_by_name() {
    let t0 = Instant::now();
    let rules = WatchRules {
        max_files: 1,
        ..WatchRules::default()
    };
    let mut w = WatchState::new("default", rules);
    w.apply(Path::new("/d/a.yaml"), read(VS, 1), t0);
    match w.apply(Path::new("/d/b.yaml"), read(VS2, 1), t0) {
        Applied::Kept {
            reason, read_error, ..
        } => {
            assert!(!read_error && reason.contains("max_files (1)"), "{reason}")
        }
        other => panic!("{other:?}"),
    }
    let update = w.commit(t0).update.expect("initial");
    assert_eq!(update.configs.len(), 1);
    assert!(
        w.configz("files", Path::new("/d"))["errors"][0]
            .as_str()
            .unwrap()
            .starts_with("/d/b.yaml: more than max_files"),
    );
}

#[test]
fn a_rescan_reads_moved_stamps_gone_files_and_held_ones() {
    let t0 = Instant::now();
    let mut w = state();
    let (a, b) = (PathBuf::from("/d/a.yaml"), PathBuf::from("/d/b.yaml"));
    w.apply(&a, read(VS, 1), t0);
    w.apply(&b, read(VS2, 1), t0);
    let stamp = Some((SystemTime::UNIX_EPOCH, 1));
    let listing = |files: Vec<(PathBuf, Option<Stamp>)>| Listing {
        files,
        unreadable_dirs: Vec::new(),
    };
    assert_eq!(
        w.to_read(Vec::new(), Some(&listing(vec![(a.clone(), stamp)]))),
        BTreeSet::from([b.clone()]),
        "b is gone, a did not move"
    );
    let moved = listing(vec![
        (a.clone(), Some((SystemTime::UNIX_EPOCH, 2))),
        (b.clone(), stamp),
    ]);
    assert_eq!(
        w.to_read(Vec::new(), Some(&moved)),
        BTreeSet::from([a.clone()])
    );
    let hint = vec![a.clone(), PathBuf::from("/d/notes.txt")];
    assert_eq!(
        w.to_read(hint, None),
        BTreeSet::from([a.clone()]),
        "only config files"
    );
    w.apply(&b, gone(), t0);
    let again = w.to_read(Vec::new(), Some(&listing(vec![(a.clone(), stamp)])));
    assert!(again.contains(&b), "held: {again:?}");
}

#[test]
fn pending_paths_merge_and_a_rescan_keeps_them() {
    let mut p = Pending::default();
    p.add(vec![PathBuf::from("a")]);
    p.add(vec![PathBuf::from("b")]);
    assert_eq!(p.take(), Some((vec!["a".into(), "b".into()], false)));
    assert!(p.take().is_none());
    p.add(vec![PathBuf::from("a")]);
    p.add(Vec::new());
    p.add(vec![PathBuf::from("b")]);
    assert_eq!(
        p.take(),
        Some((vec!["a".into(), "b".into()], true)),
        "a rescan, and the named files read whatever their stamps"
    );
}

#[test]
fn kubernetes_objects_become_service_entries_and_a_slice_edit_is_endpoints_only() {
    let svc = "apiVersion: v1\nkind: Service\nmetadata: {name: web, namespace: ns}\nspec:\n  clusterIP: 10.96.0.1\n  ports: [{name: http, port: 80}]\n";
    let slice = |ip: &str| {
        format!(
            "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata:\n  name: web-1\n  namespace: ns\n  labels: {{kubernetes.io/service-name: web}}\naddressType: IPv4\nports: [{{name: http, port: 8080}}]\nendpoints: [{{addresses: [{ip}]}}]\n"
        )
    };
    let t0 = Instant::now();
    let mut w = serving(t0);
    w.apply(Path::new("/d/k.yaml"), read(svc, 1), t0);
    w.apply(Path::new("/d/s.yaml"), read(&slice("10.0.0.1"), 1), t0);
    let update = w.commit(t0).update.expect("the Service's entry");
    let keys: Vec<String> = update.changed.iter().map(ToString::to_string).collect();
    assert_eq!(keys, ["ServiceEntry/ns/svc:web"]);
    assert_eq!(update.configs.len(), 2, "the VirtualService and the entry");
    assert!(!update.endpoints_only);
    let configz = w.configz("files", Path::new("/d"));
    assert_eq!(configz["objects"]["services"], 1, "{configz}");
    assert_eq!(configz["configs"].as_array().unwrap().len(), 2);
    w.apply(Path::new("/d/s.yaml"), read(&slice("10.0.0.2"), 2), t0);
    let update = w.commit(t0).update.expect("the slice edit");
    assert!(update.endpoints_only, "an EndpointSlice edit is EDS only");
    assert_eq!(update.changed.len(), 1);
    // A broken edit of the slice keeps its last good version.
    let broken = slice("10.0.0.3").replace("port: 8080", "port: many");
    let Applied::Parsed { report, .. } = w.apply(Path::new("/d/s.yaml"), read(&broken, 3), t0)
    else {
        panic!("parsed")
    };
    assert!(report.kept_previous);
    assert_eq!(report.errors[0].line, 8, "{}", report.errors[0]);
    assert!(w.commit(t0).update.is_none());
    // The objects gone (a file held first, then dropped), the entry goes too.
    w.apply(Path::new("/d/k.yaml"), gone(), t0);
    w.apply(Path::new("/d/k.yaml"), gone(), t0 + SETTLE);
    let update = w.commit(t0 + SETTLE).update.expect("the entry removed");
    assert_eq!(update.configs.len(), 1);
    assert!(!update.endpoints_only);
}
