//! Benchmarks of the primitives at up to 2^27 items (H100 targets: SortPairs wrapper within 5%
//! of calling CUB directly; gather/scatter with an identity map at >= 80% of copy bandwidth;
//! scan and run-length encode at >= 70%).

mod common;

use common::Harness;
use gpujoin::primitives::*;

fn random_u32(n: usize, seed: u64) -> Vec<u32> {
    let mut x = seed | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 16) as u32
        })
        .collect()
}

fn main() {
    let Some(mut h) = Harness::new("primitives benchmarks") else { return };
    let s = h.stream.clone();
    let n = 1usize << 27;
    let nb = n as u64;

    // --- Radix sort: our wrapper vs CUB called directly with preallocated temp storage.
    let keys = s.copy_from_host(&random_u32(n, 1)).unwrap();
    let vals = s.copy_from_host(&(0..n as u32).collect::<Vec<_>>()).unwrap();
    let (mut ko, mut vo) = (s.alloc::<u32>(n).unwrap(), s.alloc::<u32>(n).unwrap());
    h.case("sort", "sort_pairs_u32_u32_2p27", nb * 16, nb, |s| {
        sort_pairs(s, &keys.view(), &vals.view(), &mut ko.view_mut(), &mut vo.view_mut(), SortOrder::Ascending, None).unwrap()
    });
    {
        let mut bytes = 0usize;
        let (kp, vp) = (keys.view().as_ptr(), vals.view().as_ptr());
        let (kop, vop) = (ko.view_mut().as_mut_ptr(), vo.view_mut().as_mut_ptr());
        // SAFETY: size query.
        unsafe { gpujoin_cub_sys::gj_cub_sort_pairs_u32_u32(std::ptr::null_mut(), &mut bytes, kp, kop, vp, vop, n as i64, 0, 32, 0, s.raw()) };
        let mut temp = s.alloc::<u8>(bytes).unwrap();
        let tp = temp.view_mut().as_mut_ptr() as *mut std::ffi::c_void;
        h.case("sort", "sort_pairs_u32_u32_2p27_cub_direct", nb * 16, nb, |s| {
            // SAFETY: buffers live for the whole benchmark.
            let rc = unsafe { gpujoin_cub_sys::gj_cub_sort_pairs_u32_u32(tp, &mut bytes, kp, kop, vp, vop, n as i64, 0, 32, 0, s.raw()) };
            assert_eq!(rc, 0);
        });
    }
    let keys64 = s.copy_from_host(&random_u32(n, 2).iter().map(|&x| (x as u64) << 20 | 7).collect::<Vec<_>>()).unwrap();
    let mut ko64 = s.alloc::<u64>(n).unwrap();
    h.case("sort", "sort_keys_u64_2p27", nb * 16, nb, |s| {
        sort_keys(s, &keys64.view(), &mut ko64.view_mut(), SortOrder::Ascending, None).unwrap()
    });
    drop(ko64);

    // --- Gather / scatter with an identity map.
    let mut ident = s.alloc::<u32>(n).unwrap();
    iota_u32(&s, &mut ident.view_mut(), 0).unwrap();
    let mut out = s.alloc::<u32>(n).unwrap();
    h.case("gather", "gather_u32_identity_2p27", nb * 12, nb, |s| {
        gather_into_unchecked(s, &keys.view(), &ident.view(), &mut out.view_mut(), 0).unwrap()
    });
    let mut out64 = s.alloc::<u64>(n).unwrap();
    h.case("gather", "gather_u64_identity_2p27", nb * 20, nb, |s| {
        gather_into_unchecked(s, &keys64.view(), &ident.view(), &mut out64.view_mut(), 0).unwrap()
    });
    drop(out64);
    h.case("gather", "scatter_u32_identity_2p27", nb * 12, nb, |s| {
        scatter(s, &keys.view(), &ident.view(), &mut out.view_mut()).unwrap()
    });

    // --- Scans.
    h.case("scan", "exclusive_sum_u32_2p27", nb * 8, nb, |s| exclusive_sum(s, &keys.view(), &mut out.view_mut()).unwrap());
    let mut out64 = s.alloc::<u64>(n).unwrap();
    h.case("scan", "exclusive_sum_u32_to_u64_2p27", nb * 12, nb, |s| {
        exclusive_sum(s, &keys.view(), &mut out64.view_mut()).unwrap()
    });
    h.case("scan", "reduce_sum_u32_2p27", nb * 4, nb, |s| {
        reduce_sum(s, &keys.view()).unwrap();
    });

    // --- Run-length encode: sorted keys with runs of 4 on average (2^25 runs).
    let runs_host: Vec<u32> = (0..n as u32).map(|i| i / 4).collect();
    let runs_in = s.copy_from_host(&runs_host).unwrap();
    h.case("rle", "run_length_encode_u32_2p27_runs4", nb * 4 + (nb / 4) * 8, nb, |s| {
        run_length_encode(s, &runs_in.view()).unwrap();
    });
    {
        let (mut u, mut c, mut r) = (s.alloc::<u32>(n).unwrap(), s.alloc::<u32>(n).unwrap(), s.alloc::<i64>(1).unwrap());
        h.case("rle", "run_length_encode_into_u32_2p27_runs4", nb * 4 + (nb / 4) * 8, nb, |s| {
            run_length_encode_into(s, &runs_in.view(), &mut u.view_mut(), &mut c.view_mut(), &mut r.view_mut()).unwrap();
        });
        h.case("rle", "run_length_encode_single_pass_into_u32_2p27_runs4", nb * 4 + (nb / 4) * 8, nb, |s| {
            run_length_encode_single_pass_into(s, &runs_in.view(), &mut u.view_mut(), &mut c.view_mut(), &mut r.view_mut()).unwrap();
        });
        let uniq_in = s.copy_from_host(&(0..n as u32).collect::<Vec<_>>()).unwrap();
        h.case("rle", "run_length_encode_into_u32_2p27_unique", nb * 12, nb, |s| {
            run_length_encode_into(s, &uniq_in.view(), &mut u.view_mut(), &mut c.view_mut(), &mut r.view_mut()).unwrap();
        });
        h.case("rle", "run_length_encode_single_pass_into_u32_2p27_unique", nb * 12, nb, |s| {
            run_length_encode_single_pass_into(s, &uniq_in.view(), &mut u.view_mut(), &mut c.view_mut(), &mut r.view_mut()).unwrap();
        });
    }

    // --- Select half of the items by flag.
    let flags = s.copy_from_host(&random_u32(n, 3).iter().map(|&x| (x & 1) as u8).collect::<Vec<_>>()).unwrap();
    h.case("select", "select_flagged_u32_2p27_half", nb * 5 + nb / 2 * 4, nb, |s| {
        select_flagged(s, &keys.view(), &flags.view()).unwrap();
    });

    // --- Radix partition by 8 bits (histogram + scan + stable scatter).
    let mut hist = s.alloc::<u32>(256).unwrap();
    h.case("partition", "radix_histogram_u32_8bit_2p27", nb * 4, nb, |s| {
        radix_histogram(s, &keys.view(), 0, 8, &mut hist.view_mut()).unwrap()
    });
    h.case("partition", "radix_partition_u32_u32_8bit_2p27", nb * 16, nb, |s| {
        radix_partition(s, &keys.view(), &vals.view(), 0, 8).unwrap();
    });

    // --- Stable partition of (key, value) pairs by the low 16 bits (the partitioned hash join's
    // transform): our onesweep (one histogram read of the keys, then two 8-bit passes that each
    // read and write keys and values once) vs CUB's radix sort on the same bit range.
    let floor_u32 = nb * 4 + 2 * nb * 16;
    h.case("partition", "partition_pairs_u32_u32_16bits_2p27", floor_u32, nb, |s| {
        partition_pairs(s, &keys.view(), &vals.view(), &mut ko.view_mut(), &mut vo.view_mut(), 0..16).unwrap()
    });
    h.case("partition", "cub_sort_pairs_u32_u32_16bits_2p27", floor_u32, nb, |s| {
        sort_pairs(s, &keys.view(), &vals.view(), &mut ko.view_mut(), &mut vo.view_mut(), SortOrder::Ascending, Some(0..16)).unwrap()
    });

    // --- One-pass stable partition by up to 12 bits (partition_pairs_wide): keys read twice
    // (histogram, scatter), values once, both written once. Plain rows write through L2 (the L2
    // combines the partial sectors of the write fronts), `_wc` rows combine them in shared
    // memory first; CUB's radix sort on the same bit range for comparison.
    let floor_wide_u32 = nb * (2 * 4 + 4) + nb * (4 + 4);
    {
        let l2 = WideOptions { writes: WideWrites::L2, blocks: 0 };
        let wc = WideOptions { writes: WideWrites::Shared, blocks: 0 };
        for bits in [8u32, 11, 12] {
            let mut offsets = s.alloc::<u64>((1 << bits) + 1).unwrap();
            for (suffix, options) in [("", l2), ("_wc", wc)] {
                h.case("partition", &format!("partition_wide_u32_u32_{bits}bits_2p27{suffix}"), floor_wide_u32, nb, |s| {
                    partition_pairs_wide_into(s, &keys.view(), &vals.view(), &mut ko.view_mut(), &mut vo.view_mut(), &mut offsets.view_mut(), 0..bits, options).unwrap()
                });
            }
        }
    }
    h.case("partition", "cub_sort_pairs_u32_u32_12bits_2p27", floor_wide_u32, nb, |s| {
        sort_pairs(s, &keys.view(), &vals.view(), &mut ko.view_mut(), &mut vo.view_mut(), SortOrder::Ascending, Some(0..12)).unwrap()
    });
    {
        let k64 = s.copy_from_host(&random_u32(n, 5).iter().zip(random_u32(n, 6)).map(|(&a, b)| (a as u64) << 32 | b as u64).collect::<Vec<_>>()).unwrap();
        let v64 = s.copy_from_host(&(0..n as u64).collect::<Vec<_>>()).unwrap();
        let (mut ko64, mut vo64) = (s.alloc::<u64>(n).unwrap(), s.alloc::<u64>(n).unwrap());
        let floor_u64 = nb * 8 + 2 * nb * 32;
        h.case("partition", "partition_pairs_u64_u64_16bits_2p27", floor_u64, nb, |s| {
            partition_pairs(s, &k64.view(), &v64.view(), &mut ko64.view_mut(), &mut vo64.view_mut(), 0..16).unwrap()
        });
        h.case("partition", "cub_sort_pairs_u64_u64_16bits_2p27", floor_u64, nb, |s| {
            sort_pairs(s, &k64.view(), &v64.view(), &mut ko64.view_mut(), &mut vo64.view_mut(), SortOrder::Ascending, Some(0..16)).unwrap()
        });
        // One pass by 12 bits (u64/u64 write-combining buffers do not fit at 12 bits: L2 only).
        let floor_wide_u64 = nb * (2 * 8 + 8) + nb * (8 + 8);
        let mut offsets = s.alloc::<u64>((1 << 12) + 1).unwrap();
        let l2 = WideOptions { writes: WideWrites::L2, blocks: 0 };
        h.case("partition", "partition_wide_u64_u64_12bits_2p27", floor_wide_u64, nb, |s| {
            partition_pairs_wide_into(s, &k64.view(), &v64.view(), &mut ko64.view_mut(), &mut vo64.view_mut(), &mut offsets.view_mut(), 0..12, l2).unwrap()
        });
        h.case("partition", "cub_sort_pairs_u64_u64_12bits_2p27", floor_wide_u64, nb, |s| {
            sort_pairs(s, &k64.view(), &v64.view(), &mut ko64.view_mut(), &mut vo64.view_mut(), SortOrder::Ascending, Some(0..12)).unwrap()
        });
    }

    // --- Sorted search of 2^26 sorted keys into 2^26 sorted keys.
    let half = n / 2;
    let a_sorted = s.copy_from_host(&(0..half as u32).map(|i| i * 2).collect::<Vec<_>>()).unwrap();
    let b_sorted = s.copy_from_host(&(0..half as u32).map(|i| i * 2 + (i & 1) * 2).collect::<Vec<_>>()).unwrap();
    h.case("search", "sorted_search_lower_u32_2p26x2p26", nb * 4 + (nb / 2) * 4, nb, |s| {
        sorted_search(s, &a_sorted.view(), &b_sorted.view(), Bound::Lower, SearchOutputs::INDEX).unwrap();
    });
    h.case("search", "sorted_search_all_outputs_u32_2p26x2p26", nb * 4 + (nb / 2) * 6, nb, |s| {
        sorted_search(s, &a_sorted.view(), &b_sorted.view(), Bound::Lower, SearchOutputs::ALL).unwrap();
    });

    // --- Load-balancing search: 2^25 segments of 0..=7 items (about 2^27 items).
    let counts_host: Vec<u32> = random_u32(n / 4, 4).iter().map(|&x| x % 8).collect();
    let total: u64 = counts_host.iter().map(|&c| c as u64).sum();
    let counts = s.copy_from_host(&counts_host).unwrap();
    h.case("lbs", "load_balancing_search_2p25_segments", (nb / 4) * 12 + total * 8, total, |s| {
        load_balancing_search(s, &counts.view()).unwrap();
    });
}
