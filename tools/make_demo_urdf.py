#!/usr/bin/env python3
"""Generate the demo robot descriptions (egoroll_ros/urdf/demo_arm.urdf, demo_bimanual.urdf).

One arm definition, written out twice (single arm; two prefixed arms on a common base), so the
two files cannot drift. Deterministic: the same input always gives byte-identical files.

    python3 tools/make_demo_urdf.py           # rewrite both files
    python3 tools/make_demo_urdf.py --check   # exit 1 when a committed file differs

The arm is a small 7-DOF research arm: shoulder at 0.15 m, 0.30 m upper arm, 0.30 m forearm,
0.10 m wrist to flange (reach about 0.8 m with the gripper), a continuous wrist roll and a
prismatic gripper finger (0..0.04 m). All geometry is primitive (cylinders and boxes).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
import math
from pathlib import Path
import sys

ROOT = Path(__file__).resolve().parents[1]
URDF_DIR = ROOT / 'egoroll_ros' / 'urdf'


@dataclass(frozen=True)
class JointSpec:
    """One movable joint of the arm and the link it carries."""

    name: str
    type: str               # revolute, continuous or prismatic
    child: str
    xyz: tuple[float, float, float]   # origin in the parent link
    axis: tuple[float, float, float]
    lower: float | None     # None for continuous
    upper: float | None
    velocity: float         # rad/s or m/s
    effort: float           # N m or N
    # Geometry of the child link: a cylinder along +z from the joint origin.
    length: float
    radius: float
    mass: float
    color: str


# The arm's 7 revolute joints (+ the gripper). Pitch joints turn about y, roll joints about z;
# at zero the arm points straight up.
ARM = (
    JointSpec('shoulder_pan', 'revolute', 'shoulder_link', (0.0, 0.0, 0.10), (0, 0, 1),
              -2.9, 2.9, 2.0, 40.0, 0.05, 0.055, 1.2, 'blue'),
    JointSpec('shoulder_lift', 'revolute', 'upper_arm_link', (0.0, 0.0, 0.05), (0, 1, 0),
              -1.9, 1.9, 2.0, 40.0, 0.15, 0.05, 1.0, 'orange'),
    JointSpec('upper_arm_roll', 'revolute', 'upper_arm_roll_link', (0.0, 0.0, 0.15), (0, 0, 1),
              -2.9, 2.9, 2.5, 20.0, 0.15, 0.045, 0.9, 'orange'),
    JointSpec('elbow', 'revolute', 'forearm_link', (0.0, 0.0, 0.15), (0, 1, 0),
              -2.5, 2.5, 2.5, 20.0, 0.15, 0.04, 0.7, 'green'),
    JointSpec('forearm_roll', 'revolute', 'forearm_roll_link', (0.0, 0.0, 0.15), (0, 0, 1),
              -2.9, 2.9, 3.0, 10.0, 0.15, 0.035, 0.6, 'green'),
    JointSpec('wrist_pitch', 'revolute', 'wrist_link', (0.0, 0.0, 0.15), (0, 1, 0),
              -2.0, 2.0, 3.0, 10.0, 0.06, 0.03, 0.4, 'purple'),
    JointSpec('wrist_roll', 'continuous', 'flange_link', (0.0, 0.0, 0.06), (0, 0, 1),
              None, None, 3.5, 5.0, 0.04, 0.03, 0.3, 'purple'),
)
GRIPPER = JointSpec('gripper', 'prismatic', 'gripper_finger_link', (0.0, 0.0, 0.04), (0, 1, 0),
                    0.0, 0.04, 0.1, 20.0, 0.06, 0.008, 0.05, 'grey')
TOOL0_XYZ = (0.0, 0.0, 0.04)  # tool0: the flange face, on flange_link
BASE = dict(length=0.10, radius=0.08, mass=3.0)

COLORS = {
    'grey': (0.6, 0.6, 0.6), 'dark': (0.2, 0.2, 0.2), 'blue': (0.15, 0.35, 0.8),
    'orange': (0.95, 0.55, 0.1), 'green': (0.2, 0.7, 0.3), 'purple': (0.6, 0.3, 0.75),
}

# Scene camera of each robot: eye position and the point it looks at, in base_link.
CAMERA_ARM = ((1.1, 0.5, 0.8), (0.3, 0.0, 0.3))
CAMERA_BIMANUAL = ((1.3, 0.0, 1.1), (0.35, 0.0, 0.25))
BIMANUAL_Y = 0.25  # each arm's offset from the base centre (0.5 m apart)


def f(x: float) -> str:
    """Format a float deterministically (no -0, at most 6 decimals)."""
    s = f'{x:.6f}'.rstrip('0').rstrip('.')
    return '0' if s in ('-0', '') else s


def v3(v: tuple[float, float, float]) -> str:
    return ' '.join(f(x) for x in v)


def cylinder_inertia(mass: float, radius: float, length: float) -> tuple[float, float, float]:
    ixx = mass * (3 * radius ** 2 + length ** 2) / 12.0
    return ixx, ixx, mass * radius ** 2 / 2.0


def box_inertia(mass: float, x: float, y: float, z: float) -> tuple[float, float, float]:
    return (mass * (y * y + z * z) / 12.0, mass * (x * x + z * z) / 12.0,
            mass * (x * x + y * y) / 12.0)


def inertial(mass: float, com: tuple[float, float, float],
             diag: tuple[float, float, float]) -> list[str]:
    return [
        '    <inertial>',
        f'      <origin xyz="{v3(com)}" rpy="0 0 0"/>',
        f'      <mass value="{f(mass)}"/>',
        f'      <inertia ixx="{f(diag[0])}" ixy="0" ixz="0" iyy="{f(diag[1])}" iyz="0" '
        f'izz="{f(diag[2])}"/>',
        '    </inertial>',
    ]


def shape(kind: str, geometry: str, xyz: tuple[float, float, float], color: str | None) \
        -> list[str]:
    out = [f'    <{kind}>', f'      <origin xyz="{v3(xyz)}" rpy="0 0 0"/>',
           f'      <geometry>{geometry}</geometry>']
    if color is not None:
        out.append(f'      <material name="{color}"/>')
    return out + [f'    </{kind}>']


def cylinder_link(name: str, length: float, radius: float, mass: float, color: str) -> list[str]:
    centre = (0.0, 0.0, length / 2.0)
    geom = f'<cylinder radius="{f(radius)}" length="{f(length)}"/>'
    return ([f'  <link name="{name}">']
            + shape('visual', geom, centre, color) + shape('collision', geom, centre, None)
            + inertial(mass, centre, cylinder_inertia(mass, radius, length)) + ['  </link>'])


def box_link(name: str, size: tuple[float, float, float], mass: float, color: str,
             offset: tuple[float, float, float] = (0.0, 0.0, 0.0)) -> list[str]:
    geom = f'<box size="{v3(size)}"/>'
    return ([f'  <link name="{name}">']
            + shape('visual', geom, offset, color) + shape('collision', geom, offset, None)
            + inertial(mass, offset, box_inertia(mass, *size)) + ['  </link>'])


def frame_link(name: str) -> list[str]:
    """A massless frame (no geometry, no inertial): folded into its parent by every parser."""
    return [f'  <link name="{name}"/>']


def fixed_joint(name: str, parent: str, child: str, xyz: tuple[float, float, float],
                rpy: tuple[float, float, float] = (0.0, 0.0, 0.0)) -> list[str]:
    return [f'  <joint name="{name}" type="fixed">', f'    <parent link="{parent}"/>',
            f'    <child link="{child}"/>', f'    <origin xyz="{v3(xyz)}" rpy="{v3(rpy)}"/>',
            '  </joint>']


def moving_joint(spec: JointSpec, prefix: str, parent: str,
                 xyz: tuple[float, float, float] | None = None) -> list[str]:
    out = [f'  <joint name="{prefix}{spec.name}" type="{spec.type}">',
           f'    <parent link="{parent}"/>', f'    <child link="{prefix}{spec.child}"/>',
           f'    <origin xyz="{v3(xyz or spec.xyz)}" rpy="0 0 0"/>',
           f'    <axis xyz="{v3(spec.axis)}"/>']
    if spec.type == 'continuous':
        out.append(f'    <limit velocity="{f(spec.velocity)}" effort="{f(spec.effort)}"/>')
    else:
        out.append(f'    <limit lower="{f(spec.lower)}" upper="{f(spec.upper)}" '
                   f'velocity="{f(spec.velocity)}" effort="{f(spec.effort)}"/>')
    out.append('    <dynamics damping="0.1" friction="0"/>')
    return out + ['  </joint>']


def arm(prefix: str, mount_parent: str, mount_xyz: tuple[float, float, float]) -> list[str]:
    """One arm: its base plate fixed on ``mount_parent``, then the 7 joints, tool0, gripper."""
    out: list[str] = []
    base = f'{prefix}arm_base_link'
    out += cylinder_link(base, BASE['length'], BASE['radius'], BASE['mass'], 'dark')
    out += fixed_joint(f'{prefix}arm_mount', mount_parent, base, mount_xyz)
    parent = base
    for spec in ARM:
        out += cylinder_link(prefix + spec.child, spec.length, spec.radius, spec.mass,
                             spec.color)
        out += moving_joint(spec, prefix, parent)
        parent = prefix + spec.child
    flange = parent
    out += frame_link(f'{prefix}tool0')
    out += fixed_joint(f'{prefix}tool0_joint', flange, f'{prefix}tool0', TOOL0_XYZ)
    # Gripper: a fixed finger on one side, the moving finger slides along +y from the centre.
    out += box_link(f'{prefix}gripper_fixed_finger_link', (0.015, 0.01, GRIPPER.length), 0.05,
                    'grey', (0.0, 0.0, GRIPPER.length / 2))
    out += fixed_joint(f'{prefix}gripper_fixed_finger_joint', flange,
                       f'{prefix}gripper_fixed_finger_link', (0.0, -0.005, 0.04))
    out += box_link(prefix + GRIPPER.child, (0.015, 0.01, GRIPPER.length), GRIPPER.mass,
                    GRIPPER.color, (0.0, 0.0, GRIPPER.length / 2))
    out += moving_joint(GRIPPER, prefix, flange, (0.0, 0.005, 0.04))
    return out


def look_at_rpy(eye: tuple[float, float, float], target: tuple[float, float, float]) \
        -> tuple[float, float, float]:
    """Roll-pitch-yaw of a camera_link (x forward, z up) at ``eye`` looking at ``target``."""
    dx, dy, dz = (t - e for t, e in zip(target, eye, strict=True))
    yaw = math.atan2(dy, dx)
    pitch = -math.atan2(dz, math.hypot(dx, dy))
    return (0.0, pitch, yaw)


def camera(eye: tuple[float, float, float], target: tuple[float, float, float]) -> list[str]:
    """camera_link (x forward, z up) and camera_optical_frame (z forward, x right, y down)."""
    out = box_link('camera_link', (0.03, 0.09, 0.03), 0.1, 'dark')
    out += fixed_joint('camera_joint', 'base_link', 'camera_link', eye, look_at_rpy(eye, target))
    out += frame_link('camera_optical_frame')
    out += fixed_joint('camera_optical_joint', 'camera_link', 'camera_optical_frame',
                       (0.0, 0.0, 0.0), (-math.pi / 2, 0.0, -math.pi / 2))
    return out


def materials() -> list[str]:
    return [f'  <material name="{name}"><color rgba="{v3(rgb)} 1"/></material>'
            for name, rgb in COLORS.items()]


def header(name: str, what: str) -> list[str]:
    return ['<?xml version="1.0"?>',
            '<!-- Generated by tools/make_demo_urdf.py; edit that script, not this file. -->',
            f'<!-- {what} -->', f'<robot name="{name}">']


def world_base() -> list[str]:
    """base_link: the root frame (a massless frame on the table)."""
    return frame_link('base_link')


def demo_arm() -> str:
    """The single-arm demo robot."""
    lines = header('egoroll_demo_arm', 'egoroll demo arm: 7 revolute joints (wrist_roll '
                   'continuous), a prismatic gripper, tool0 at the flange, a fixed scene camera.')
    lines += materials() + world_base() + arm('', 'base_link', (0.0, 0.0, 0.0))
    lines += camera(*CAMERA_ARM) + ['</robot>', '']
    return '\n'.join(lines)


def demo_bimanual() -> str:
    """Two demo arms (prefixes left_ and right_), 0.5 m apart on a common base_link."""
    lines = header('egoroll_demo_bimanual', 'egoroll demo bimanual: the demo arm twice '
                   '(left_ at +y, right_ at -y, 0.5 m apart), a fixed scene camera.')
    lines += materials() + world_base()
    lines += arm('left_', 'base_link', (0.0, BIMANUAL_Y, 0.0))
    lines += arm('right_', 'base_link', (0.0, -BIMANUAL_Y, 0.0))
    lines += camera(*CAMERA_BIMANUAL) + ['</robot>', '']
    return '\n'.join(lines)


OUTPUTS = {'demo_arm.urdf': demo_arm, 'demo_bimanual.urdf': demo_bimanual}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--check', action='store_true',
                        help='compare with the committed files instead of writing them')
    parser.add_argument('--out', type=Path, default=URDF_DIR, help='output directory')
    args = parser.parse_args(argv)
    stale = []
    for name, make in OUTPUTS.items():
        path = args.out / name
        text = make()
        if args.check:
            if not path.is_file() or path.read_text() != text:
                stale.append(str(path))
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
    if stale:
        print('out of date (run tools/make_demo_urdf.py): ' + ', '.join(stale), file=sys.stderr)
        return 1
    return 0


if __name__ == '__main__':
    sys.exit(main())
