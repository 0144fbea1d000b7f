//! Reading a history back: records of the previous record schema still read,
//! and a record that does not read is skipped with its reason instead of
//! failing the whole history.

mod common;

use common::measurement;
use fusebench_store::Store;

#[test]
fn unreadable_records_are_skipped_with_their_reason() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.sqlite");
    let mut store = Store::open(&path).unwrap();
    let ids: Vec<i64> = (0..4)
        .map(|i| store.save(&measurement("f", &[1.0 + i as f64], i)).unwrap())
        .collect();
    drop(store);
    let c = rusqlite::Connection::open(&path).unwrap();
    let set = |id: i64, sql: &str| {
        c.execute(
            &format!("UPDATE measurements SET {sql} WHERE id = ?1"),
            [id],
        )
        .unwrap();
    };
    set(ids[0], "record = '{\"schema\": 2, \"subject\":'");
    set(
        ids[1],
        "record = replace(record, '\"schema\": 2', '\"schema\": 9')",
    );
    set(ids[3], "record = x'7b00ff'");
    drop(c);
    let h = Store::open_read_only(&path).unwrap().history("f").unwrap();
    assert_eq!(
        h.records.iter().map(|s| s.id).collect::<Vec<_>>(),
        [ids[2]],
        "the readable record"
    );
    let skipped: Vec<i64> = h.skipped.iter().map(|s| s.id).collect();
    assert_eq!(skipped, [ids[0], ids[1], ids[3]]);
    assert!(h.skipped[0].reason.contains("JSON"), "{:?}", h.skipped[0]);
    assert!(
        h.skipped[1].reason.contains("schema version 9"),
        "{:?}",
        h.skipped[1]
    );
    assert!(
        h.skipped[2].reason.contains("binary data"),
        "{:?}",
        h.skipped[2]
    );
}

#[test]
fn records_of_schema_version_1_still_read() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.sqlite");
    let mut store = Store::open(&path).unwrap();
    let id = store.save(&measurement("f", &[3.0, 1.0, 2.0], 1)).unwrap();
    drop(store);
    // As the previous fusebench wrote them: the CUDA API version in `driver`,
    // NVRTC's in `cuda`.
    let c = rusqlite::Connection::open(&path).unwrap();
    let record: String = c
        .query_row("SELECT record FROM measurements WHERE id = ?1", [id], |r| {
            r.get(0)
        })
        .unwrap();
    let mut v: serde_json::Value = serde_json::from_str(&record).unwrap();
    v["schema"] = 1.into();
    v["environment"]["driver"] = "13.0".into();
    v["environment"]["cuda"] = "NVRTC 12.8".into();
    c.execute(
        "UPDATE measurements SET record = ?1 WHERE id = ?2",
        rusqlite::params![v.to_string(), id],
    )
    .unwrap();
    drop(c);
    let h = Store::open_read_only(&path).unwrap().history("f").unwrap();
    assert!(h.skipped.is_empty(), "{:?}", h.skipped);
    let env = &h.records[0].measurement.environment;
    assert_eq!((env.cuda.as_str(), env.nvrtc.as_str()), ("13.0", "12.8"));
    assert_eq!(h.records[0].measurement.summary.median, 2.0);
}
