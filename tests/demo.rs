//! The demonstration prints the seeds' exact results: on the GPU when there is one, else from the
//! CPU reference with a plain notice (never a panic). With GPUJOIN_REQUIRE_GPU=1 it must run on
//! the GPU.

use gpujoin::demo::{run, Ran};
use gpujoin_testkit::reference::vectors;

/// The `(aIndex, bIndex)` rows listed under a section title.
fn listed_pairs(text: &str, title: &str) -> Vec<(i64, i64)> {
    let start = text.find(title).unwrap_or_else(|| panic!("no section {title:?} in:\n{text}"));
    text[start..]
        .lines()
        .skip(3)
        .take_while(|l| l.contains('('))
        .map(|l| {
            let inside = &l[l.find('(').unwrap() + 1..l.find(')').unwrap()];
            let mut it = inside.split(',').map(|x| x.trim().parse::<i64>().unwrap());
            (it.next().unwrap(), it.next().unwrap())
        })
        .collect()
}

fn as_i64(pairs: &[(u32, u32)]) -> Vec<(i64, i64)> {
    let f = |x: u32| if x == vectors::NONE { -1 } else { x as i64 };
    pairs.iter().map(|&(a, b)| (f(a), f(b))).collect()
}

#[test]
fn demo_prints_the_seed_results_exactly() {
    let (ran, text) = run().expect("the demo runs");
    if std::env::var_os("GPUJOIN_REQUIRE_GPU").is_some_and(|v| v != "0") {
        assert_eq!(ran, Ran::Gpu, "GPUJOIN_REQUIRE_GPU is set but the demo ran on the CPU:\n{text}");
    }
    if ran == Ran::CpuReference {
        assert!(text.starts_with("NOTICE: no GPU available"), "{text}");
        gpujoin::device::testing::report_skip(
            "demo_prints_the_seed_results_exactly",
            "no device: checked the CPU-reference demonstration instead of the GPU demo",
        );
    }
    assert!(text.contains("Inner-join (19 items):"), "{text}");
    assert!(text.contains("Outer-join (50 items):"), "{text}");
    assert_eq!(listed_pairs(&text, "Inner-join"), as_i64(&vectors::MGPU_INNER));
    assert_eq!(listed_pairs(&text, "Outer-join"), as_i64(&vectors::MGPU_OUTER));
    assert!(text.contains("    0:   100  102  103  103  103  103  103  104  104  105"), "A keys in ModernGPU's format");
    assert!(text.contains("(10 rows)"), "the seed 001 left join has 10 rows");
    if ran == Ran::Gpu {
        assert!(text.contains("Throughput: sort_merge_join inner"), "{text}");
    }
}
