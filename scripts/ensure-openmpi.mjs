// Run before the tests (npm's pretest): the cluster tests start molotof under a
// real launcher, Debian's Open MPI `mpirun` (package openmpi-bin). Installs it
// when it is missing and this user may (root with apt-get); otherwise says
// what to do, and those tests are skipped with the reason.
import { execSync } from 'node:child_process'
import { existsSync } from 'node:fs'

const MPIRUN = '/usr/bin/mpirun'
if (!existsSync(MPIRUN)) {
  const root = typeof process.getuid === 'function' && process.getuid() === 0
  const apt = existsSync('/usr/bin/apt-get')
  if (root && apt) {
    console.log("pretest: installing Debian's openmpi-bin for the mpirun tests (apt-get)…")
    try {
      execSync('apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openmpi-bin > /dev/null', { stdio: 'inherit', shell: '/bin/bash' })
    } catch {
      console.warn('pretest: could not install openmpi-bin; the mpirun tests will be skipped (install the openmpi-bin package)')
    }
  } else {
    console.warn(`pretest: ${MPIRUN} is missing; the mpirun tests will be skipped (sudo apt-get install openmpi-bin)`)
  }
}

// The network-namespace test puts each node in its own namespace (ip netns, veth, bridge): iproute2.
const IP = '/usr/sbin/ip'
if (!existsSync(IP) && typeof process.getuid === 'function' && process.getuid() === 0 && existsSync('/usr/bin/apt-get')) {
  console.log('pretest: installing iproute2 for the network-namespace test (apt-get)…')
  try {
    execSync('DEBIAN_FRONTEND=noninteractive apt-get install -y -qq iproute2 > /dev/null', { stdio: 'inherit', shell: '/bin/bash' })
  } catch {
    console.warn('pretest: could not install iproute2; the network-namespace test will be skipped')
  }
}
