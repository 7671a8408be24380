//! Traces: replay on the original program gives the same result, JSON round trips, and
//! malformed traces are refused.

mod common;

use common::{fails, sched2, stage2};
use proptest::prelude::*;
use sparsec_ir::{AttrValue, ThreadTag};
use sparsec_schedule::{Instruction, Schedule, ScheduleError as E, Trace, TraceArg};

#[test]
fn trace_records_successful_calls_only() {
    let mut sch = sched2("csrmm");
    let b = sch.get_block("csrmm1").unwrap();
    let l = sch.get_loops(b).unwrap();
    let _ = sch.split(l[1], &[None, None]).unwrap_err();
    let k = sch.split(l[1], &[None, Some(8)]).unwrap();
    sch.bind(k[1], ThreadTag::ThreadIdxX).unwrap();
    sch.annotate(b, "x", AttrValue::Float(0.25)).unwrap();
    let names: Vec<&str> = sch.trace().insts.iter().map(|i| i.name.as_str()).collect();
    assert_eq!(names, ["get_block", "get_loops", "split", "bind", "annotate"]);
    let split = &sch.trace().insts[2];
    assert_eq!(split.inputs, vec![TraceArg::Rv(l[1].id()), TraceArg::OptInt(None), TraceArg::OptInt(Some(8))]);
    assert_eq!(split.outputs, vec![k[0].id(), k[1].id()]);
    assert_eq!(sch.trace().insts[3].inputs[1], TraceArg::ThreadTag("threadIdx.x".into()));
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
    let shift = |a: &mut TraceArg| {
        if let TraceArg::Rv(x) = a {
            *x += 100;
        }
    };
    for inst in &mut t.insts {
        inst.inputs.iter_mut().for_each(shift);
        inst.outputs.iter_mut().for_each(|x| *x += 100);
    }
    assert_eq!(t.replay(&stage2("csrmm")).unwrap().text(), sch.text());
}

#[test]
fn replay_refuses_malformed_traces() {
    let f = stage2("csrmm");
    let inst = |name: &str, inputs: Vec<TraceArg>, outputs: Vec<u32>| Instruction { name: name.into(), inputs, outputs };
    let cases = vec![
        Trace { insts: vec![inst("teleport", vec![], vec![])] },
        Trace { insts: vec![inst("split", vec![TraceArg::Rv(5), TraceArg::OptInt(Some(2))], vec![])] },
        Trace { insts: vec![inst("get_block", vec![TraceArg::Int(3)], vec![0])] },
        Trace { insts: vec![inst("get_block", vec![TraceArg::Str("csrmm1".into())], vec![])] },
        Trace {
            insts: vec![
                inst("get_block", vec![TraceArg::Str("csrmm1".into())], vec![0]),
                inst("get_loops", vec![TraceArg::Rv(0)], vec![1, 2]),
                inst("bind", vec![TraceArg::Rv(2), TraceArg::ThreadTag("warp.x".into())], vec![]),
            ],
        },
    ];
    for t in cases {
        let e = t.replay(&f).map(|s| s.text()).unwrap_err();
        assert!(matches!(e, E::BadTrace { .. }), "{e:?}");
    }
    // A trace whose primitive fails on this program reports the primitive's error.
    let t = Trace {
        insts: vec![
            inst("get_block", vec![TraceArg::Str("csrmm1".into())], vec![0]),
            inst("get_loops", vec![TraceArg::Rv(0)], vec![1, 2]),
            inst("parallel", vec![TraceArg::Rv(1)], vec![]),
        ],
    };
    let e = t.replay(&f).map(|s| s.text()).unwrap_err();
    assert!(matches!(e, E::ReductionLoop { .. }), "{e:?}");
    assert!(Trace::from_json("{\"insts\": [{\"name\": 1}]}").is_err());
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

fn trace_arg() -> impl Strategy<Value = TraceArg> {
    prop_oneof![
        any::<u32>().prop_map(TraceArg::Rv),
        any::<i64>().prop_map(TraceArg::Int),
        any::<Option<i64>>().prop_map(TraceArg::OptInt),
        "[a-zA-Z0-9_.]{0,10}".prop_map(TraceArg::Str),
        prop::collection::vec("[a-z]{0,4}", 0..3).prop_map(TraceArg::Strs),
        prop::collection::vec(any::<i64>(), 0..3).prop_map(TraceArg::Ints),
        attr_value().prop_map(TraceArg::Value),
        (0..6usize).prop_map(|t| TraceArg::ThreadTag(ThreadTag::ALL[t].name().to_string())),
    ]
}

fn trace() -> impl Strategy<Value = Trace> {
    let inst = ("[a-z_]{1,12}", prop::collection::vec(trace_arg(), 0..4), prop::collection::vec(any::<u32>(), 0..3))
        .prop_map(|(name, inputs, outputs)| Instruction { name, inputs, outputs });
    prop::collection::vec(inst, 0..6).prop_map(|insts| Trace { insts })
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

    /// Any trace value round trips through JSON.
    #[test]
    fn traces_round_trip_through_json(t in trace()) {
        let back = Trace::from_json(&t.to_json()).unwrap();
        prop_assert_eq!(back, t);
    }
}
