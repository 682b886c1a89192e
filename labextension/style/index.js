import './base.css';
import './jobs.css';
import './a11y.css';
