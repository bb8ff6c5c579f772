//! Hand-written declarations of the isl functions we use (isl 0.25, Debian libisl-dev).
//! Ownership follows isl's annotations: `take` arguments are consumed, `keep` borrowed,
//! `give` results owned by the caller.
#![allow(non_camel_case_types)]
use std::os::raw::{c_char, c_int, c_long, c_ulong, c_void};

#[repr(C)]
pub struct isl_ctx(c_void);
#[repr(C)]
pub struct isl_set(c_void);
#[repr(C)]
pub struct isl_map(c_void);
#[repr(C)]
pub struct isl_basic_set(c_void);
#[repr(C)]
pub struct isl_mat(c_void);
#[repr(C)]
pub struct isl_val(c_void);

pub const ISL_DIM_CST: c_int = 0;
pub const ISL_DIM_PARAM: c_int = 1;
pub const ISL_DIM_SET: c_int = 3;
pub const ISL_DIM_DIV: c_int = 4;
pub const ISL_ON_ERROR_CONTINUE: c_int = 1;

pub type BasicSetFn = unsafe extern "C" fn(*mut isl_basic_set, *mut c_void) -> c_int;

extern "C" {
    pub fn isl_ctx_alloc() -> *mut isl_ctx;
    pub fn isl_ctx_free(ctx: *mut isl_ctx);
    pub fn isl_options_set_on_error(ctx: *mut isl_ctx, val: c_int) -> c_int;
    pub fn isl_ctx_set_max_operations(ctx: *mut isl_ctx, max: c_ulong);
    pub fn isl_ctx_reset_operations(ctx: *mut isl_ctx);
    pub fn isl_ctx_abort(ctx: *mut isl_ctx);
    pub fn isl_ctx_aborted(ctx: *mut isl_ctx) -> c_int;
    pub fn isl_ctx_last_error_msg(ctx: *mut isl_ctx) -> *const c_char;
    pub fn isl_ctx_reset_error(ctx: *mut isl_ctx);

    pub fn isl_set_read_from_str(ctx: *mut isl_ctx, s: *const c_char) -> *mut isl_set;
    pub fn isl_set_free(s: *mut isl_set) -> *mut isl_set;
    pub fn isl_set_copy(s: *mut isl_set) -> *mut isl_set;
    pub fn isl_set_to_str(s: *mut isl_set) -> *mut c_char;
    pub fn isl_set_union(a: *mut isl_set, b: *mut isl_set) -> *mut isl_set;
    pub fn isl_set_intersect(a: *mut isl_set, b: *mut isl_set) -> *mut isl_set;
    pub fn isl_set_subtract(a: *mut isl_set, b: *mut isl_set) -> *mut isl_set;
    pub fn isl_set_coalesce(s: *mut isl_set) -> *mut isl_set;
    pub fn isl_set_make_disjoint(s: *mut isl_set) -> *mut isl_set;
    pub fn isl_set_compute_divs(s: *mut isl_set) -> *mut isl_set;
    pub fn isl_set_is_empty(s: *mut isl_set) -> c_int;
    pub fn isl_set_foreach_basic_set(s: *mut isl_set, f: BasicSetFn, user: *mut c_void) -> c_int;
    pub fn isl_set_count_val(s: *mut isl_set) -> *mut isl_val;

    pub fn isl_map_read_from_str(ctx: *mut isl_ctx, s: *const c_char) -> *mut isl_map;
    pub fn isl_map_free(m: *mut isl_map) -> *mut isl_map;
    pub fn isl_map_copy(m: *mut isl_map) -> *mut isl_map;
    pub fn isl_map_to_str(m: *mut isl_map) -> *mut c_char;
    pub fn isl_map_intersect(a: *mut isl_map, b: *mut isl_map) -> *mut isl_map;
    pub fn isl_map_apply_range(a: *mut isl_map, b: *mut isl_map) -> *mut isl_map;
    pub fn isl_map_reverse(m: *mut isl_map) -> *mut isl_map;
    pub fn isl_map_lexmax(m: *mut isl_map) -> *mut isl_map;
    pub fn isl_map_lexmin(m: *mut isl_map) -> *mut isl_map;
    pub fn isl_map_domain(m: *mut isl_map) -> *mut isl_set;
    pub fn isl_map_range(m: *mut isl_map) -> *mut isl_set;
    pub fn isl_map_coalesce(m: *mut isl_map) -> *mut isl_map;
    pub fn isl_map_compute_divs(m: *mut isl_map) -> *mut isl_map;
    pub fn isl_map_intersect_domain(m: *mut isl_map, s: *mut isl_set) -> *mut isl_map;
    pub fn isl_map_intersect_range(m: *mut isl_map, s: *mut isl_set) -> *mut isl_map;
    pub fn isl_map_is_empty(m: *mut isl_map) -> c_int;

    pub fn isl_basic_set_free(b: *mut isl_basic_set) -> *mut isl_basic_set;
    pub fn isl_basic_set_lift(b: *mut isl_basic_set) -> *mut isl_basic_set;
    pub fn isl_basic_set_detect_equalities(b: *mut isl_basic_set) -> *mut isl_basic_set;
    pub fn isl_basic_set_remove_redundancies(b: *mut isl_basic_set) -> *mut isl_basic_set;
    pub fn isl_basic_set_dim(b: *mut isl_basic_set, t: c_int) -> c_int;
    pub fn isl_basic_set_to_str(b: *mut isl_basic_set) -> *mut c_char;
    pub fn isl_basic_set_equalities_matrix(b: *mut isl_basic_set, c1: c_int, c2: c_int, c3: c_int, c4: c_int) -> *mut isl_mat;
    pub fn isl_basic_set_inequalities_matrix(b: *mut isl_basic_set, c1: c_int, c2: c_int, c3: c_int, c4: c_int) -> *mut isl_mat;

    pub fn isl_mat_free(m: *mut isl_mat) -> *mut isl_mat;
    pub fn isl_mat_rows(m: *mut isl_mat) -> c_int;
    pub fn isl_mat_cols(m: *mut isl_mat) -> c_int;
    pub fn isl_mat_get_element_val(m: *mut isl_mat, row: c_int, col: c_int) -> *mut isl_val;

    pub fn isl_val_free(v: *mut isl_val) -> *mut isl_val;
    pub fn isl_val_get_num_si(v: *mut isl_val) -> c_long;
    pub fn isl_val_is_int(v: *mut isl_val) -> c_int;

    pub fn free(p: *mut c_void);
}

