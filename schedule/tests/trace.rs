//! Traces: replay on the original program gives the same result, JSON round trips, and
//! malformed traces are refused.

mod common;

use common::{fails, sched1, sched2, stage2};
use proptest::prelude::*;
use sparsec_ir::{AttrValue, ThreadTag};
use sparsec_schedule::primitives::{Bind, Split};
use sparsec_schedule::{Schedule, ScheduleError as E, Step, Trace, TraceError};

#[test]
fn trace_records_successful_calls_only() {
    let mut sch = sched2("csrmm");
    let b = sch.get_block("csrmm1").unwrap();
    let l = sch.get_loops(b).unwrap();
    let _ = sch.split(l[1], &[None, None]).unwrap_err();
    let k = sch.split(l[1], &[None, Some(8)]).unwrap();
    sch.bind(k[1], ThreadTag::ThreadIdxX).unwrap();
    sch.annotate(b, "x", AttrValue::Float(0.25)).unwrap();
    let names: Vec<&str> = sch.trace().insts.iter().map(|i| i.step.name()).collect();
    assert_eq!(names, ["get_block", "get_loops", "split", "bind", "annotate"]);
    let split = &sch.trace().insts[2];
    assert_eq!(split.step, Step::Split(Split { r#loop: l[1], factors: vec![None, Some(8)] }));
    assert_eq!(split.outputs, vec![k[0].id(), k[1].id()]);
    assert_eq!(sch.trace().insts[3].step, Step::Bind(Bind { r#loop: k[1], tag: ThreadTag::ThreadIdxX }));
    insta::assert_snapshot!("trace_json", sch.trace().to_json());
    let replayed = sch.trace().replay(&stage2("csrmm")).unwrap();
    assert_eq!(replayed.text(), sch.text());
    assert_eq!(replayed.trace(), sch.trace());
}

#[test]
fn replay_maps_reference_ids() {
    // The same instructions with other ids replay the same way.
    let mut sch = sched2("csrmm");
    let b = sch.get_block("csrmm1").unwrap();
    let l = sch.get_loops(b).unwrap();
    sch.reorder(&[l[1], l[0]]).unwrap();
    let mut t = sch.trace().clone();
    for inst in &mut t.insts {
        inst.step.refs_mut().into_iter().for_each(|x| *x += 100);
        inst.outputs.iter_mut().for_each(|x| *x += 100);
    }
    assert_eq!(t.replay(&stage2("csrmm")).unwrap().text(), sch.text());
}

#[test]
fn replay_refuses_malformed_traces() {
    let f = stage2("csrmm");
    let trace = |lines: &[&str]| Trace::from_json(&format!("{{\"insts\": [{}]}}", lines.join(",")));
    // Instructions that do not decode: the error names the instruction.
    let undecodable = [
        (r#"{"op":"teleport"}"#, "unknown variant `teleport`"),
        (r#"{"op":"get_block","name":3,"outputs":[0]}"#, "invalid type"),
        (r#"{"op":"split","loop":0,"factor":[2]}"#, "unknown field `factor`"),
        (r#"{"op":"bind","loop":2,"tag":"warp.x"}"#, "unknown thread tag `warp.x`"),
        (r#"{"op":"set_scope","buffer":"C","scope":"texture"}"#, "unknown scope `texture`"),
        (r#"{"op":"get_loops","block":0,"outputs":"all"}"#, "`outputs`"),
    ];
    for (inst, why) in undecodable {
        let e = trace(&[r#"{"op":"lower_atomic"}"#, inst]).unwrap_err();
        assert!(matches!(e, TraceError::Instruction { index: 1, .. }), "{inst}: {e:?}");
        assert!(e.to_string().starts_with("instruction 1: ") && e.to_string().contains(why), "{inst}: {e}");
    }
    assert!(matches!(Trace::from_json("[]"), Err(TraceError::NotATrace(_))));
    assert!(matches!(Trace::from_json(r#"{"instructions": []}"#), Err(TraceError::NotATrace(_))));
    // Instructions that do not fit the trace: the error names the position.
    let misfits = [
        (vec![r#"{"op":"split","loop":5,"factors":[2]}"#], 0, "reference #5 is not an output of an earlier instruction"),
        (vec![r#"{"op":"get_block","name":"csrmm1"}"#], 0, "0 outputs recorded, 1 produced"),
        (vec![r#"{"op":"get_block","name":"csrmm1","outputs":[0]}"#, r#"{"op":"get_loops","block":0,"outputs":[1]}"#], 1, "1 outputs recorded, 2 produced"),
    ];
    for (lines, at, why) in misfits {
        let e = trace(&lines).unwrap().replay(&f).map(|s| s.text()).unwrap_err();
        assert!(matches!(e, E::BadTrace { index, .. } if index == at), "{e:?}");
        assert!(e.to_string().contains(why), "{e}");
    }
    // A trace whose primitive fails on this program reports the primitive's error.
    let t = trace(&[
        r#"{"op":"get_block","name":"csrmm1","outputs":[0]}"#,
        r#"{"op":"get_loops","block":0,"outputs":[1,2]}"#,
        r#"{"op":"parallel","loop":1}"#,
    ]);
    let e = t.unwrap().replay(&f).map(|s| s.text()).unwrap_err();
    assert!(matches!(e, E::ReductionLoop { .. }), "{e:?}");
}

#[test]
fn schedule_refuses_an_invalid_function() {
    let mut f = stage2("csrmm");
    f.stage = sparsec_ir::Stage::I;
    assert!(matches!(Schedule::new(f), Err(E::InvalidInput(_))));
    // Lowering steps through the schedule check the stage.
    let mut sch = sched2("csrmm");
    let e = fails(&mut sch, |s| s.lower_sparse_iter());
    assert!(matches!(e, E::WrongStage { primitive: "lower_sparse_iter", .. }), "{e:?}");
    sch.lower_sparse_buffer().unwrap();
    let e = fails(&mut sch, |s| s.lower_sparse_buffer());
    assert!(matches!(e, E::WrongStage { primitive: "lower_sparse_buffer", .. }), "{e:?}");
}

// ---- properties ----------------------------------------------------------------------------

/// One random step on csrmm's Stage II.
#[derive(Clone, Debug)]
enum Op {
    Split { block: usize, pick: usize, factors: Vec<Option<i64>> },
    Reorder { block: usize, rotate: usize },
    Fuse { block: usize },
    Bind { block: usize, pick: usize, tag: usize },
    Kind { block: usize, pick: usize, kind: usize },
}

const BLOCKS: [&str; 3] = ["csrmm0", "csrmm_init1", "csrmm1"];

fn op() -> impl Strategy<Value = Op> {
    let factor = prop_oneof![Just(None), (1i64..6).prop_map(Some)];
    prop_oneof![
        (0..3usize, 0..4usize, prop::collection::vec(factor, 2..4))
            .prop_map(|(block, pick, factors)| Op::Split { block, pick, factors }),
        (0..3usize, 1..4usize).prop_map(|(block, rotate)| Op::Reorder { block, rotate }),
        (0..3usize).prop_map(|block| Op::Fuse { block }),
        (0..3usize, 0..4usize, 0..6usize).prop_map(|(block, pick, tag)| Op::Bind { block, pick, tag }),
        (0..3usize, 0..4usize, 0..3usize).prop_map(|(block, pick, kind)| Op::Kind { block, pick, kind }),
    ]
}

/// Applies an op; failures are allowed (and must leave the schedule unchanged).
fn apply(sch: &mut Schedule, op: &Op) {
    let block = match op {
        Op::Split { block, .. } | Op::Reorder { block, .. } | Op::Fuse { block } | Op::Bind { block, .. } | Op::Kind { block, .. } => *block,
    };
    let b = sch.get_block(BLOCKS[block]).unwrap();
    let loops = sch.get_loops(b).unwrap();
    if loops.is_empty() {
        return;
    }
    let before = sch.text();
    let n = sch.trace().insts.len();
    let r = match op {
        Op::Split { pick, factors, .. } => sch.split(loops[pick % loops.len()], factors).map(drop),
        Op::Reorder { rotate, .. } => {
            let mut order = loops.clone();
            let k = rotate % order.len();
            order.rotate_left(k);
            sch.reorder(&order)
        }
        Op::Fuse { .. } => sch.fuse(&loops).map(drop),
        Op::Bind { pick, tag, .. } => sch.bind(loops[pick % loops.len()], ThreadTag::ALL[*tag]),
        Op::Kind { pick, kind, .. } => {
            let l = loops[pick % loops.len()];
            match kind {
                0 => sch.parallel(l),
                1 => sch.vectorize(l),
                _ => sch.unroll(l),
            }
        }
    };
    if r.is_err() {
        assert_eq!(sch.text(), before);
        assert_eq!(sch.trace().insts.len(), n);
    }
}

fn attr_value() -> impl Strategy<Value = AttrValue> {
    prop_oneof![
        any::<bool>().prop_map(AttrValue::Bool),
        any::<i64>().prop_map(AttrValue::Int),
        (-1000i32..1000).prop_map(|x| AttrValue::Float(f64::from(x) / 8.0 + 0.125)),
        "[a-z_\"\\\\ ]{0,8}".prop_map(AttrValue::Str),
    ]
}

/// A random instruction of any primitive, built through its JSON form.
fn instruction() -> impl Strategy<Value = sparsec_schedule::Instruction> {
    use serde_json::json;
    let ids = prop::collection::vec(0u32..50, 0..4);
    let name = "[a-zA-Z0-9_.]{0,10}";
    let factors = prop::collection::vec(any::<Option<i64>>(), 1..4);
    (0usize..26, ids, name, factors, 0..6usize, 0..3usize, attr_value(), any::<u32>(), prop::collection::vec(any::<u32>(), 0..3))
        .prop_map(|(op, ids, name, factors, tag, scope, value, id, outputs)| {
            let tag = ThreadTag::ALL[tag].name();
            let scope = ["global", "shared", "local"][scope];
            let step = match op {
                0 => json!({"op": "get_sparse_iteration", "name": name}),
                1 => json!({"op": "get_sp_iters", "sp_iter": id}),
                2 => json!({"op": "sparse_reorder", "sp_iter": id, "order": ids}),
                3 => json!({"op": "sparse_fuse", "sp_iter": id, "iters": ids}),
                4 => json!({"op": "lower_sparse_iter"}),
                5 => json!({"op": "lower_sparse_buffer"}),
                6 => json!({"op": "lower_atomic"}),
                7 => json!({"op": "horizontal_fusion"}),
                8 => json!({"op": "get_block", "name": name}),
                9 => json!({"op": "get_loops", "block": id}),
                10 => json!({"op": "split", "loop": id, "factors": factors}),
                11 => json!({"op": "fuse", "loops": ids}),
                12 => json!({"op": "reorder", "loops": ids}),
                13 => json!({"op": "bind", "loop": id, "tag": tag}),
                14 => json!({"op": "parallel", "loop": id}),
                15 => json!({"op": "vectorize", "loop": id}),
                16 => json!({"op": "unroll", "loop": id}),
                17 => json!({"op": "cache_read", "block": id, "buffer": name, "scope": scope, "at": id / 2}),
                18 => json!({"op": "cache_write", "block": id, "buffer": name, "scope": scope, "at": id / 2}),
                19 => json!({"op": "set_scope", "buffer": name, "scope": scope}),
                20 => json!({"op": "annotate", "target": id, "key": name, "value": value}),
                21 => json!({"op": "unannotate", "target": id, "key": name}),
                22 => json!({"op": "decompose_reduction", "block": id, "loop": id / 3}),
                23 => json!({"op": "rfactor", "loop": id, "axis": id % 4}),
                24 => json!({"op": "compute_at", "block": id, "loop": id / 3}),
                _ => json!({"op": "reverse_compute_at", "block": id, "loop": id / 3}),
            };
            let step: Step = serde_json::from_value(step).unwrap();
            sparsec_schedule::Instruction { step, outputs }
        })
}

fn trace() -> impl Strategy<Value = Trace> {
    prop::collection::vec(instruction(), 0..6).prop_map(|insts| Trace { insts })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// Random schedules of csrmm: the trace survives JSON and replays to the same program,
    /// which still verifies and lowers to Stage III.
    #[test]
    fn random_schedules_replay(ops in prop::collection::vec(op(), 1..7)) {
        let mut sch = sched2("csrmm");
        for o in &ops {
            apply(&mut sch, o);
        }
        let json = sch.trace().to_json();
        let back = Trace::from_json(&json).unwrap();
        prop_assert_eq!(&back, sch.trace());
        let again = back.replay(&stage2("csrmm")).unwrap();
        prop_assert_eq!(again.text(), sch.text());
        // Same results as the unscheduled program on a small matrix with empty rows, up to
        // rounding: a split and reorder of the reduction loop changes the order of the sums.
        let m = &common::generated()[2].1;
        let args = common::args_for("csrmm", m, 3);
        let want = common::run_c(&common::to_stage3(&stage2("csrmm")), &args);
        let got = common::run_c(&common::to_stage3(sch.func()), &args);
        prop_assert_eq!(got.len(), want.len());
        for (g, w) in got.iter().zip(&want) {
            prop_assert!((g - w).abs() <= 1e-5 * g.abs().max(w.abs()).max(1.0), "got {g}, want {w}");
        }
    }

    /// Any trace value round trips through JSON, and its JSON follows the schema.
    #[test]
    fn traces_round_trip_through_json(t in trace()) {
        let back = Trace::from_json(&t.to_json()).unwrap();
        prop_assert_eq!(&back, &t);
        let v: serde_json::Value = serde_json::from_str(&t.to_json()).unwrap();
        prop_assert!(schema().is_valid(&v), "{}", t.to_json());
    }
}


/// The checked-in schema, compiled once.
fn schema() -> &'static jsonschema::Validator {
    static V: std::sync::OnceLock<jsonschema::Validator> = std::sync::OnceLock::new();
    V.get_or_init(|| {
        let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/trace.schema.json")).unwrap();
        jsonschema::validator_for(&serde_json::from_str(&text).unwrap()).unwrap()
    })
}

/// `docs/trace.schema.json` is what `Trace::json_schema` generates from the primitives'
/// argument types (`SPARSEC_BLESS=1` rewrites it), so it names every primitive; it
/// accepts every trace shipped in the project and the default CPU and GPU schedules of every
/// corpus workload, and refuses what the reader refuses: an unknown `op` or key, a missing
/// or mistyped argument, an unknown thread tag or scope, a trace without `insts`.
#[test]
fn traces_follow_the_checked_in_json_schema() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/trace.schema.json");
    let generated = format!("{}\n", serde_json::to_string_pretty(&Trace::json_schema()).unwrap());
    if std::env::var_os("SPARSEC_BLESS").is_some() {
        std::fs::write(path, &generated).unwrap();
    }
    assert_eq!(std::fs::read_to_string(path).unwrap(), generated, "docs/trace.schema.json is stale: rerun with SPARSEC_BLESS=1");
    let generated_schema = Trace::json_schema();
    let ops: Vec<&str> = generated_schema["properties"]["insts"]["items"]["oneOf"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["properties"]["op"]["const"].as_str().unwrap())
        .collect();
    assert_eq!(ops.len(), 31, "{ops:?}");
    assert!(ops.contains(&"specialize") && ops.contains(&"partition") && ops.contains(&"cache_accumulate") && ops.contains(&"workspace"), "{ops:?}");
    let valid = |text: &str, what: &str| {
        let v: serde_json::Value = serde_json::from_str(text).unwrap();
        let errors: Vec<String> = schema().iter_errors(&v).map(|e| e.to_string()).collect();
        assert!(errors.is_empty(), "{what}: {errors:?}");
        Trace::from_json(text).unwrap_or_else(|e| panic!("{what}: {e}"));
    };
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/..");
    for file in ["examples/hyb.trace.json", "burn-sparsec/kernels/csrmm.trace.json", "burn-sparsec/kernels/sddmm.trace.json", "burn-sparsec/kernels/bsrmm.trace.json", "burn-sparsec/kernels/csrmm_bias_relu.trace.json"] {
        valid(&std::fs::read_to_string(format!("{root}/{file}")).unwrap(), file);
    }
    let mut checked = 0;
    for entry in std::fs::read_dir(format!("{root}/tests/workloads")).unwrap() {
        let name = entry.unwrap().path().file_stem().unwrap().to_string_lossy().into_owned();
        for gpu in [false, true] {
            let mut sch = sched1(&name);
            let done = if gpu { sparsec_schedule::auto::gpu_full(&mut sch, 128) } else { sparsec_schedule::auto::cpu_full(&mut sch) };
            if done.is_ok() {
                valid(&sch.trace().to_json(), &format!("{name}, gpu {gpu}"));
                checked += 1;
            }
        }
    }
    assert!(checked >= 30, "only {checked} default schedules");
    // The documentation's example of each primitive decodes and follows the schema.
    let doc = std::fs::read_to_string(format!("{root}/docs/trace-format.md")).unwrap();
    let examples = doc.split("## One example per primitive").nth(1).unwrap().split("```json\n").nth(1).unwrap().split("```").next().unwrap();
    let mut shown: Vec<String> = Vec::new();
    for line in examples.lines() {
        let inst: sparsec_schedule::Instruction = serde_json::from_str(line).unwrap_or_else(|e| panic!("{line}: {e}"));
        valid(&format!("{{\"insts\": [{line}]}}"), line);
        shown.push(inst.step.name().to_string());
    }
    shown.sort();
    let mut all: Vec<String> = ops.iter().map(|s| s.to_string()).collect();
    all.sort();
    assert_eq!(shown, all, "docs/trace-format.md shows one example per primitive");
    // What the reader refuses, the schema refuses.
    for bad in [
        r#"{"insts": [{"op": "splot", "loop": 0, "factors": [2]}]}"#,
        r#"{"insts": [{"op": "split", "loop": 0, "factors": [2], "extra": 1}]}"#,
        r#"{"insts": [{"op": "split", "factors": [2]}]}"#,
        r#"{"insts": [{"op": "split", "loop": "0", "factors": [2]}]}"#,
        r#"{"insts": [{"op": "bind", "loop": 0, "tag": "warp.x"}]}"#,
        r#"{"insts": [{"op": "set_scope", "buffer": "C", "scope": "texture"}]}"#,
        r#"{"insts": [{"op": "get_block", "name": "b", "outputs": [-1]}]}"#,
        r#"{"steps": []}"#,
    ] {
        let v: serde_json::Value = serde_json::from_str(bad).unwrap();
        assert!(!schema().is_valid(&v), "the schema accepts {bad}");
        assert!(Trace::from_json(bad).is_err(), "the reader accepts {bad}");
    }
}
