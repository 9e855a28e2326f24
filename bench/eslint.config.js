// `npm run lint` in bench/: the repository's rules on the benchmark's code (the root's
// `npm run lint` leaves bench/ out). Patterns here are relative to bench/.
import root from '../eslint.config.js';

export default [...root, { ignores: ['results/'] }];
