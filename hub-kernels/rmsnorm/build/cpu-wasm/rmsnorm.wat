;; y = x * 1/sqrt(mean(x^2) + eps) * (offset + w) over rows of H (H % 4 == 0), SIMD over 4 lanes.
;; w: float32 (dt 0) or bfloat16 (dt 2). Imports only its memory.
(module
  (import "env" "memory" (memory 1))
  (func $ldw (param $w i32) (param $i i32) (param $dt i32) (result v128)
    (if (result v128) (i32.eqz (local.get $dt))
      (then (v128.load (i32.add (local.get $w) (i32.shl (local.get $i) (i32.const 2)))))
      (else (i32x4.shl (v128.load16x4_u (i32.add (local.get $w) (i32.shl (local.get $i) (i32.const 1)))) (i32.const 16)))))
  (func (export "rms_norm") (param $x i32) (param $w i32) (param $y i32) (param $rows i32) (param $H i32)
      (param $eps f32) (param $off f32) (param $dt i32)
    (local $r i32) (local $i i32) (local $acc v128) (local $v v128) (local $scale v128) (local $xp i32) (local $yp i32)
    (block $done (loop $row
      (br_if $done (i32.ge_u (local.get $r) (local.get $rows)))
      (local.set $xp (i32.add (local.get $x) (i32.shl (i32.mul (local.get $r) (local.get $H)) (i32.const 2))))
      (local.set $yp (i32.add (local.get $y) (i32.shl (i32.mul (local.get $r) (local.get $H)) (i32.const 2))))
      (local.set $acc (v128.const f32x4 0 0 0 0))
      (local.set $i (i32.const 0))
      (block $b1 (loop $l1
        (br_if $b1 (i32.ge_u (local.get $i) (local.get $H)))
        (local.set $v (v128.load (i32.add (local.get $xp) (i32.shl (local.get $i) (i32.const 2)))))
        (local.set $acc (f32x4.add (local.get $acc) (f32x4.mul (local.get $v) (local.get $v))))
        (local.set $i (i32.add (local.get $i) (i32.const 4)))
        (br $l1)))
      (local.set $scale (f32x4.splat (f32.div (f32.const 1)
        (f32.sqrt (f32.add (local.get $eps) (f32.div
          (f32.add (f32.add (f32x4.extract_lane 0 (local.get $acc)) (f32x4.extract_lane 1 (local.get $acc)))
                   (f32.add (f32x4.extract_lane 2 (local.get $acc)) (f32x4.extract_lane 3 (local.get $acc))))
          (f32.convert_i32_u (local.get $H))))))))
      (local.set $i (i32.const 0))
      (block $b2 (loop $l2
        (br_if $b2 (i32.ge_u (local.get $i) (local.get $H)))
        (v128.store (i32.add (local.get $yp) (i32.shl (local.get $i) (i32.const 2)))
          (f32x4.mul
            (f32x4.mul (v128.load (i32.add (local.get $xp) (i32.shl (local.get $i) (i32.const 2)))) (local.get $scale))
            (f32x4.add (f32x4.splat (local.get $off)) (call $ldw (local.get $w) (local.get $i) (local.get $dt)))))
        (local.set $i (i32.add (local.get $i) (i32.const 4)))
        (br $l2)))
      (local.set $r (i32.add (local.get $r) (i32.const 1)))
      (br $row)))))
