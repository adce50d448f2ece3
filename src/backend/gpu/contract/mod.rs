//! The kernel contract, checked without a GPU: for every entry point in the tables of
//! docs/kernel-abi.md, the parameter list each dialect's source declares (CUDA, HIP, OpenCL)
//! against the argument sequence the generic GPU ops build for it, recorded by
//! [`RecordingDevice`] while [`calls::exercise`] runs the ops on devices that imitate the
//! backends (so that shape- and device-dependent entries are reached); and the activation codes
//! of the shared scalar core (kernels-common/scalar_core.h) against [`Activation::code`].

mod calls;
mod half_calls;

use std::collections::{BTreeMap, BTreeSet};

use crate::backend::recording::signatures::{self, CType};
use crate::backend::recording::{Imitate, RecordingDevice, op_set_source};
use crate::backend::{RawArg, cuda, opencl, tensor_core_sgemm};
use crate::context::ContextOptions;
use crate::dtype::DType;
use crate::kernel::Dialect;
use crate::ops::Activation;
use crate::recurrent_algorithm::RecurrentAlgorithm;

const DOC: &str = include_str!("../../../../docs/kernel-abi.md");
const SCALAR_CORE: &str = include_str!("../../../../kernels-common/scalar_core.h");
const DIALECTS: [Dialect; 3] = [Dialect::Cuda, Dialect::Hip, Dialect::OpenCl];

/// Which dialects a table of the doc covers: every one, or one only.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Scope {
    All,
    Only(Dialect),
}

/// The entries of the doc's kernel tables, by scope (sections `## Kernels`, `## CUDA-only ...`,
/// `## Hopper-only ...`, `## OpenCL-only ...`; a row's first cell names one entry or several),
/// each with its parameter cell.
fn table_entries() -> Vec<(Scope, String, String)> {
    let mut out = Vec::new();
    let mut scope = None;
    for line in DOC.lines() {
        if let Some(title) = line.strip_prefix("## ") {
            scope = match title {
                "Kernels" => Some(Scope::All),
                t if t.starts_with("CUDA-only") || t.starts_with("Hopper-only") => {
                    Some(Scope::Only(Dialect::Cuda))
                }
                t if t.starts_with("OpenCL-only") => Some(Scope::Only(Dialect::OpenCl)),
                _ => None,
            };
            continue;
        }
        let Some(scope) = scope else { continue };
        let Some(row) = line.strip_prefix("| ").filter(|r| r.starts_with('`')) else {
            continue;
        };
        let mut cells = row.split('|');
        let cell = cells.next().unwrap_or_default();
        let params = cells.next().unwrap_or_default().trim();
        for name in cell.split('`').skip(1).step_by(2) {
            out.push((scope, name.to_string(), params.to_string()));
        }
    }
    out
}

/// The parameters a row's cell names, as the doc's conventions spell them: the views of the
/// first group (base and offset each), then groups that alternate sizes (`uint`) and `float`s;
/// "as `other`" is the list of the row `other` of the same scope.
fn doc_params(
    tables: &[(Scope, String, String)],
    scope: Scope,
    cell: &str,
) -> Vec<(CType, String)> {
    if let Some(other) = cell.strip_prefix("as `") {
        let other = other.trim_end_matches('`');
        return tables
            .iter()
            .find(|(s, e, p)| *s == scope && e == other && !p.starts_with("as "))
            .map_or_else(Vec::new, |(_, _, p)| doc_params(tables, scope, p));
    }
    let mut out = Vec::new();
    for (i, group) in cell.trim_matches('`').split(';').enumerate() {
        for name in group.split(',').map(str::trim).filter(|n| !n.is_empty()) {
            match i {
                0 => {
                    out.push((CType::Pointer, name.to_string()));
                    out.push((CType::U64, format!("{name} offset")));
                }
                i if i % 2 == 1 => out.push((CType::U32, name.to_string())),
                _ => out.push((CType::F32, name.to_string())),
            }
        }
    }
    out
}

/// The devices the ops are recorded on: each dialect, with and without cooperative launches,
/// and every GEMM rule (CUDA sm_90a and sm_80, HIP, OpenCL tensor cores with and without
/// warpgroup MMA, OpenCL SIMT).
fn imitations() -> Vec<Imitate> {
    let coop = Some(1 << 20);
    let cl = |units: u32, tensor_cores: bool, warpgroup: bool| {
        let limits = opencl::sgemm::Limits {
            max_work_group: 1024,
            local_mem: 48 << 10,
            compute_units: units,
            tensor_cores,
        };
        let choice = opencl::sgemm::SgemmChoice::new(limits, None).expect("valid limits");
        Box::new(move |m, n, k| choice.kernel(m, n, k, warpgroup)) as _
    };
    vec![
        Imitate {
            dialect: Dialect::Cuda,
            compute_units: 132,
            sgemm: Box::new(|m, n, k| {
                if cuda::kernels::warpgroup_gemm_fits(132, m, n, k) {
                    cuda::kernels::SGEMM_WG128
                } else {
                    cuda::kernels::sgemm_for(90, false, 132, m, n)
                }
            }),
            co_resident: coop,
        },
        Imitate {
            dialect: Dialect::Cuda,
            compute_units: 108,
            sgemm: Box::new(|m, n, _| tensor_core_sgemm(108, m, n)),
            co_resident: None,
        },
        Imitate {
            dialect: Dialect::Hip,
            compute_units: 104,
            sgemm: Box::new(|_, _, _| cuda::kernels::SGEMM),
            co_resident: None,
        },
        Imitate {
            dialect: Dialect::OpenCl,
            compute_units: 132,
            sgemm: cl(132, true, true),
            co_resident: coop,
        },
        Imitate {
            dialect: Dialect::OpenCl,
            // Few compute units, so that products fill them twice with `sgemm_tc128` tiles.
            compute_units: 32,
            sgemm: cl(32, true, false),
            co_resident: None,
        },
        Imitate {
            dialect: Dialect::OpenCl,
            compute_units: 132,
            sgemm: cl(132, false, false),
            co_resident: None,
        },
    ]
}

fn dialect_named(name: &str) -> Dialect {
    DIALECTS
        .into_iter()
        .find(|d| format!("{d:?}") == name)
        .expect("a dialect")
}

fn kind(a: &RawArg) -> CType {
    match a {
        RawArg::Ptr(_) => CType::Pointer,
        RawArg::F32(_) => CType::F32,
        RawArg::U32(_) => CType::U32,
        RawArg::I32(_) => CType::I32,
        RawArg::U64(_) => CType::U64,
    }
}

fn list(kinds: &[CType]) -> String {
    let parts: Vec<String> = kinds.iter().map(ToString::to_string).collect();
    parts.join(", ")
}

/// `(dialect, entry)` to the argument kinds the op passes and whether the launch has dynamic
/// shared memory.
type Recorded = BTreeMap<(String, String), (Vec<CType>, bool)>;

/// `(dialect, entry)` to the element type of each pointer the op passes (`None` for the other
/// arguments), from every launch of that entry.
type PointerTypes = BTreeMap<(String, String), Vec<Vec<Option<DType>>>>;

/// What a launch passes in `dialect`: the op's arguments, then (OpenCL) the `__local` argument
/// of its dynamic shared memory.
fn passed(dialect: Dialect, (kinds, shared): &(Vec<CType>, bool)) -> Vec<CType> {
    let mut out = kinds.clone();
    if dialect == Dialect::OpenCl && *shared {
        out.push(CType::Local);
    }
    out
}

/// Records every launch of [`calls::exercise`] on each imitated device, with the default
/// options, again with the tier-0 stand-ins forced, with the GEMM path forced and with each
/// block-local variant (W_hh in registers, shared memory, through L1) forced:
/// `(dialect, entry)` to its argument kinds. Two different lists for one entry of one dialect
/// are an error.
fn record(errors: &mut Vec<String>) -> (Recorded, PointerTypes) {
    let mut recorded = Recorded::new();
    let mut pointers = PointerTypes::new();
    let forced = ContextOptions {
        force_tier0: true,
        ..ContextOptions::default()
    };
    // The per-step GEMM path's cells run only where a sequence takes that path.
    let gemm_steps = ContextOptions {
        recurrent_algorithm: Some(RecurrentAlgorithm::Gemm),
        ..ContextOptions::default()
    };
    // The block-local kernels with W_hh in registers run only when forced.
    let registers = ContextOptions {
        recurrent_algorithm: Some(RecurrentAlgorithm::BlockLocalRegisters),
        ..ContextOptions::default()
    };
    // The Elman cell's shared-memory and L1 block-local kernels (and every cell's L1 ones
    // under CUDA) run only when forced at the exercised sizes, which the register variant
    // takes.
    let [shared, l1] = [
        RecurrentAlgorithm::BlockLocal,
        RecurrentAlgorithm::BlockLocalL1,
    ]
    .map(|a| ContextOptions {
        recurrent_algorithm: Some(a),
        ..ContextOptions::default()
    });
    let runs = imitations()
        .into_iter()
        .map(|i| (i, ContextOptions::default()))
        .chain(imitations().into_iter().map(|i| (i, forced.clone())))
        .chain(imitations().into_iter().map(|i| (i, gemm_steps.clone())))
        .chain(imitations().into_iter().map(|i| (i, registers.clone())))
        .chain(imitations().into_iter().map(|i| (i, shared.clone())))
        .chain(imitations().into_iter().map(|i| (i, l1.clone())));
    for (imitate, options) in runs {
        let dialect = format!("{:?}", imitate.dialect);
        let (device, log) = RecordingDevice::new(imitate);
        let ops = super::create(device, &options).expect("recording ops");
        if let Err(e) = calls::exercise(&*ops.ops) {
            errors.push(format!("{dialect}: the recorded ops failed: {e}"));
        }
        for launch in log.lock().iter() {
            let kinds = (
                launch.args.iter().map(kind).collect(),
                launch.shared_bytes > 0,
            );
            let key = (dialect.clone(), launch.entry.clone());
            let types = pointers.entry(key.clone()).or_default();
            if !types.contains(&launch.pointer_types) {
                types.push(launch.pointer_types.clone());
            }
            match recorded.get(&key) {
                Some(k) if *k != kinds => errors.push(format!(
                    "`{}` launched on {dialect} with two argument lists: ({}) and ({})",
                    launch.entry,
                    list(&k.0),
                    list(&kinds.0)
                )),
                Some(_) => {}
                None => {
                    recorded.insert(key, kinds);
                }
            }
        }
    }
    (recorded, pointers)
}

/// The element type a pointer parameter's declaration names (`const float* x_base`,
/// `__global const uint* i_base`): its words before the `*`, without qualifiers.
fn pointee(decl: &str) -> String {
    let before = decl.split('*').next().unwrap_or_default();
    let words: Vec<&str> = before
        .split_whitespace()
        .filter(|w| {
            !matches!(
                *w,
                "const" | "__global" | "global" | "volatile" | "restrict"
            )
        })
        .collect();
    words.join(" ")
}

/// Whether a parameter declared as pointing to `pointee` may receive a view of `passed`: f32
/// views go to `float` pointers, u32 views to `uint` ones, bf16 and f16 views (their bits) to
/// `ushort` ones (`unsigned short` in CUDA and HIP). The one exception: the grid
/// reductions' and sequence kernels' counters (tickets, barriers) are words of the f32 scratch,
/// zeroed as floats (0.0 has the bits of 0), which the kernels declare `uint`.
fn pointer_fits(pointee: &str, name: &str, passed: DType) -> bool {
    let uint = matches!(pointee, "uint" | "unsigned int" | "unsigned");
    match passed {
        DType::U32 => uint,
        DType::Bf16 | DType::F16 => matches!(pointee, "ushort" | "unsigned short"),
        DType::F32 => {
            pointee == "float"
                || (uint
                    && ["ticket", "barrier", "counter"]
                        .iter()
                        .any(|w| name.contains(w)))
        }
        _ => false,
    }
}

/// Each pointer the Rust side passes against the element type the definition declares: a u32
/// view where the kernel reads floats, or an f32 view where it reads u32 indices, is an error,
/// as is a pointer packed without its type.
fn pointer_errors(
    entry: &str,
    place: &str,
    params: &[(CType, String)],
    launches: &[Vec<Option<DType>>],
) -> Vec<String> {
    let mut errors = Vec::new();
    for types in launches {
        for (i, ((ctype, decl), passed)) in params.iter().zip(types).enumerate() {
            if *ctype != CType::Pointer {
                continue;
            }
            let (to, name) = (pointee(decl), decl.rsplit(' ').next().unwrap_or_default());
            match passed {
                Some(t) if pointer_fits(&to, name, *t) => {}
                Some(t) => errors.push(format!(
                    "`{entry}`, {place}: parameter {} `{decl}` points to {to}, the Rust side \
                     passes a view of {t}",
                    i + 1
                )),
                None => errors.push(format!(
                    "`{entry}`, {place}: parameter {} `{decl}` gets a pointer packed without \
                     its element type",
                    i + 1
                )),
            }
        }
    }
    errors
}

/// Compares one definition with the arguments the Rust side passes: the first position that
/// differs, and both lists.
fn compare(entry: &str, place: &str, params: &[(CType, String)], rust: &[CType]) -> Option<String> {
    let i =
        (0..params.len().max(rust.len())).find(|&i| params.get(i).map(|p| &p.0) != rust.get(i))?;
    let source = params
        .get(i)
        .map_or("nothing".into(), |(t, d)| format!("`{d}` ({t})"));
    let passed = rust.get(i).map_or("nothing".into(), ToString::to_string);
    let types: Vec<CType> = params.iter().map(|p| p.0.clone()).collect();
    Some(format!(
        "`{entry}`, {place}: parameter {} is {source} there, the Rust side passes {passed}\n    \
         {place} ({}): {}\n    Rust ({}): {}",
        i + 1,
        params.len(),
        list(&types),
        rust.len(),
        list(rust)
    ))
}

#[test]
fn every_table_entry_matches_the_arguments_the_ops_pass_in_every_dialect() {
    let mut errors = Vec::new();
    let tables = table_entries();
    assert!(tables.len() > 40, "kernel tables not found: {tables:?}");
    let in_scope = |d: Dialect, e: &str| {
        tables
            .iter()
            .any(|(s, t, _)| t == e && (*s == Scope::All || *s == Scope::Only(d)))
    };
    let (recorded, pointers) = record(&mut errors);

    for dialect in DIALECTS {
        let defs = signatures::kernels(&op_set_source(dialect), dialect == Dialect::OpenCl);
        let defined: BTreeSet<&str> = defs.iter().map(|s| s.entry.as_str()).collect();
        // HIP compiles the CUDA text, whose CUDA-only entries are compiled out by `#if`.
        let listed_for = if dialect == Dialect::Hip {
            Dialect::Cuda
        } else {
            dialect
        };
        for e in &defined {
            if !in_scope(listed_for, e) {
                errors.push(format!(
                    "`{e}` is defined in {dialect:?} but in no table of docs/kernel-abi.md for it"
                ));
            }
        }
        for (scope, entry, _) in &tables {
            if *scope != Scope::All && *scope != Scope::Only(dialect) {
                continue;
            }
            let own = recorded.get(&(format!("{dialect:?}"), entry.clone()));
            // An entry every dialect has may be reached on another one (OpenCL never launches
            // its `sgemm`, HIP no persistent kernel); the lists must then agree anyway.
            let any = recorded
                .iter()
                .find(|((_, e), _)| e == entry)
                .map(|(_, k)| k);
            let Some(rust) = own.or(if *scope == Scope::All { any } else { None }) else {
                errors.push(format!(
                    "`{entry}` ({dialect:?}) is never launched by the recorded ops"
                ));
                continue;
            };
            let mine: Vec<_> = defs.iter().filter(|s| s.entry == *entry).collect();
            if mine.is_empty() {
                errors.push(format!(
                    "`{entry}` is in the table but not defined in {dialect:?}"
                ));
            }
            let own_types = pointers.get(&(format!("{dialect:?}"), entry.clone()));
            let types = own_types.or_else(|| {
                let any = pointers.iter().find(|((_, e), _)| e == entry);
                any.map(|(_, t)| t).filter(|_| *scope == Scope::All)
            });
            for s in mine {
                let place = format!("{dialect:?} source");
                errors.extend(compare(entry, &place, &s.params, &passed(dialect, rust)));
                if let Some(types) = types {
                    errors.extend(pointer_errors(entry, &place, &s.params, types));
                }
            }
        }
    }
    // The table's own parameter column, against the launches of the dialects it covers; its
    // first section promises one list in every dialect.
    for (scope, entry, cell) in &tables {
        let launches: BTreeSet<_> = recorded
            .iter()
            .filter(|((d, e), _)| {
                e == entry && (*scope == Scope::All || Scope::Only(dialect_named(d)) == *scope)
            })
            .map(|(_, (kinds, _))| kinds.clone())
            .collect();
        if launches.len() > 1 {
            let lists: Vec<String> = launches.iter().map(|k| list(k)).collect();
            errors.push(format!(
                "`{entry}` is launched with different arguments by dialect: {lists:?}"
            ));
        }
        let doc = doc_params(&tables, *scope, cell);
        for rust in launches.iter().take(1) {
            errors.extend(compare(entry, "docs/kernel-abi.md", &doc, rust));
        }
    }
    for (dialect, entry) in recorded.keys() {
        if !in_scope(dialect_named(dialect), entry) {
            errors.push(format!(
                "`{entry}` is launched on {dialect} but in no table of docs/kernel-abi.md for it"
            ));
        }
    }
    assert!(
        errors.is_empty(),
        "kernel contract broken:\n{}",
        errors.join("\n")
    );
}

#[test]
fn a_pointer_of_another_element_type_is_an_error() {
    let source = "extern \"C\" __global__ void k(const float* x_base, u64 x_off, \
                  const uint* i_base, u64 i_off, uint* ticket_base, u64 ticket_off, uint n) {}";
    let params = signatures::kernels(source, false)[0].params.clone();
    let (f, u) = (Some(DType::F32), Some(DType::U32));
    let right = vec![f, None, u, None, f, None, None];
    assert_eq!(
        pointer_errors("k", "t", &params, &[right]),
        Vec::<String>::new()
    );
    // u32 indices where the kernel reads floats, f32 where it reads indices.
    let swapped = vec![u, None, f, None, f, None, None];
    let errors = pointer_errors("k", "t", &params, &[swapped]);
    assert_eq!(errors.len(), 2, "{errors:?}");
    assert!(errors[0].contains("points to float") && errors[0].contains("view of u32"));
    assert!(errors[1].contains("points to uint") && errors[1].contains("view of f32"));
    let untyped = vec![None, None, u, None, f, None, None];
    assert_eq!(pointer_errors("k", "t", &params, &[untyped]).len(), 1);
}

#[test]
fn half_views_go_to_ushort_pointers() {
    let source = "__kernel void k(__global const ushort* x_base, ulong x_off, \
                  __global float* y_base, ulong y_off, uint n) {}";
    let params = signatures::kernels(source, true)[0].params.clone();
    for half in [DType::Bf16, DType::F16] {
        let right = vec![Some(half), None, Some(DType::F32), None, None];
        assert_eq!(
            pointer_errors("k", "t", &params, &[right]),
            Vec::<String>::new()
        );
        let swapped = vec![Some(DType::F32), None, Some(half), None, None];
        let errors = pointer_errors("k", "t", &params, &[swapped]);
        assert_eq!(errors.len(), 2, "{errors:?}");
        assert!(errors[1].contains("points to float") && errors[1].contains(half.name()));
    }
    let cuda = "extern \"C\" __global__ void k(const unsigned short* x_base, u64 x_off) {}";
    let params = signatures::kernels(cuda, false)[0].params.clone();
    let right = vec![Some(DType::F16), None];
    assert!(pointer_errors("k", "t", &params, &[right]).is_empty());
}

/// The header's name of each activation; a new variant does not compile until it has one.
fn header_name(act: Activation) -> &'static str {
    match act {
        Activation::Identity => "ACT_IDENTITY",
        Activation::Relu => "ACT_RELU",
        Activation::Sigmoid => "ACT_SIGMOID",
        Activation::Tanh => "ACT_TANH",
        Activation::Gelu => "ACT_GELU",
        Activation::LeakyRelu { .. } => "ACT_LEAKY",
    }
}

#[test]
fn scalar_core_activation_codes_are_the_enum_codes() {
    let defined: BTreeMap<&str, u32> = SCALAR_CORE
        .lines()
        .filter_map(|l| l.strip_prefix("#define "))
        .filter(|l| l.starts_with("ACT_"))
        .filter_map(|l| {
            let (name, value) = l.split_once(' ')?;
            Some((name, value.trim().trim_end_matches('u').parse().ok()?))
        })
        .collect();
    let all = [
        Activation::Identity,
        Activation::Relu,
        Activation::Sigmoid,
        Activation::Tanh,
        Activation::Gelu,
        Activation::LeakyRelu { slope: 0.01 },
    ];
    for act in all {
        assert_eq!(
            defined.get(header_name(act)),
            Some(&act.code()),
            "{} in kernels-common/scalar_core.h against Activation::{act:?}.code()",
            header_name(act)
        );
    }
    assert_eq!(
        defined.len(),
        all.len(),
        "codes without a variant: {defined:?}"
    );
}
