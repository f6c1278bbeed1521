"""Sleep-EDF (SPEC section 2): one EEG channel of whole nights, quantised sample by sample to 256 tokens.

recordings.py  reading a night: EDF checks, hypnogram, trim, the EEG channel, normalisation
quantiles.py   the 256 tokens: exact pooled quantile boundaries and the bin of each sample
sources.py     where the recordings come from (mne's record table and downloader, or a mirror folder) and how
               their names pair into nights
split.py       mne's age table and the subject-disjoint, age-stratified split
datamodule.py  SleepEDFDataModule: preparation, training windows, evaluation windows, rendering and plots
"""

from domains.sleep_edf.datamodule import SleepEDFDataModule

__all__ = ["SleepEDFDataModule"]
