// Run before the tests (npm's pretest): the HTML report test looks at the
// report in a real headless Chromium, Debian's package. Installs it when it is
// missing and this user may (root with apt-get); otherwise says what to do.
import { execSync } from 'node:child_process'
import { existsSync } from 'node:fs'

const CHROMIUM = '/usr/bin/chromium'
if (!existsSync(CHROMIUM)) {
  const root = typeof process.getuid === 'function' && process.getuid() === 0
  const apt = existsSync('/usr/bin/apt-get')
  if (root && apt) {
    console.log('pretest: installing Debian\'s chromium for the HTML report test (apt-get)…')
    try {
      execSync('apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium > /dev/null', { stdio: 'inherit', shell: '/bin/bash' })
    } catch {
      console.warn('pretest: could not install chromium; the HTML report test is skipped (install the chromium package)')
    }
  } else {
    console.warn(`pretest: ${CHROMIUM} is missing; the HTML report test is skipped without it (sudo apt-get install chromium)`)
  }
}
