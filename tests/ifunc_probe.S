@ tests/ifunc_probe.S - armhf only: the layout that GNU ld's Cortex-A8
@ erratum fix gets wrong (tests/gwlink.sh). ifunc_probe_call is a 32-bit
@ non-branch instruction then a Thumb-2 tail call to the IFUNC
@ ifunc_probe_answer whose first halfword sits at page offset 0xffe, with
@ the resolver in the same 4 KB page. Right: the call returns 42. Wrong:
@ it runs the resolver, which returns the implementation's address.
    .syntax unified
    .arch armv7-a
    .thumb
    .section .text.ifunc_probe, "ax", %progbits
    .balign 4096
page_start:
    .type probe_resolver, %function
    .thumb_func
probe_resolver:
    ldr r0, =probe_impl
    bx lr
    .ltorg
    .type probe_impl, %function
    .thumb_func
probe_impl:
    movs r0, #42
    bx lr
    .global ifunc_probe_answer
    .type ifunc_probe_answer, %gnu_indirect_function
    .set ifunc_probe_answer, probe_resolver
    .org 0xffa
    .global ifunc_probe_call
    .type ifunc_probe_call, %function
    .thumb_func
ifunc_probe_call:
    mov.w r1, r1
    b.w ifunc_probe_answer
    .section .note.GNU-stack, "", %progbits
